"""The paper's figures beyond training: privacy curves ε(σ) per β (:mod:`.curves`), GG outlier probabilities
(:mod:`.outliers`) and the PATE/GGNMax experiments (:mod:`.pate_experiments`)."""
