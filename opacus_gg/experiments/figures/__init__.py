"""The paper's figures beyond training: privacy curves ε(σ) per β (:mod:`.curves`), GG outlier probabilities
(:mod:`.outliers`), the PATE/GGNMax experiments (:mod:`.pate_experiments`) and the β study's accuracy
against β (:mod:`.beta_study`)."""
