"""WIP (issue 21 item 1): build the ball DP table at σ and print ε at the two issue settings.

PYTHONPATH=$PWD python3 benchmarks/ball_prv_table_wip.py '{"a0":0.03,"ratio_low":1.03,"ratio_high":1.005,"high_from":0.5}' /tmp/top.pkl
"""
import sys, time, json, pickle
from opacus_gg.accountants.ball_prv import build_table
from opacus_gg.accountants.history import PairSegment
from opacus_gg.accountants.api import _compose_tight
kw = json.loads(sys.argv[1]); out = sys.argv[2]
sigma = kw.pop("sigma", 1.0); beta = kw.pop("beta", 1.5); p = kw.pop("p", beta)
tab = build_table(1/sigma, beta, p, **kw)
print("table s", round(tab.seconds,1), "states", tab.states, flush=True)
pickle.dump(tab.top, open(out, "wb"))
for q, T in ((0.01, 1000), (0.001, 100000)):
    eps = {}
    for direction in ("remove", "add"):
        t = time.time()
        res = _compose_tight([PairSegment((((0, 0), tab.top),), q, T)], 1e-5, direction, 0.01, 1e-8)
        eps[direction] = res.epsilon_upper
        print(q, T, direction, res.epsilon_upper, round(time.time() - t, 1), flush=True)
    print("DP eps", q, T, max(eps.values()), flush=True)
