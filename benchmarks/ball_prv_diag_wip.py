"""WIP diagnostics for docs/wip_issue21_dp_table.md: one-step / subsampled ε of a saved table; with an argument,
also a table WITHOUT the Base pair (diagnostic only, not a bound)."""
import sys, pickle
from opacus_gg.accountants import ball_prv as B
from opacus_gg.accountants.history import PairSegment
from opacus_gg.accountants.api import _compose_tight
def evals(top, tag):
    for q, T, delta in ((1.0, 1, 1e-3), (1.0, 1, 1e-5), (0.1, 10, 1e-5), (0.01, 1000, 1e-5)):
        seg = PairSegment((((0, 0), top),), q, T)
        e = {d: _compose_tight([seg], delta, d, 0.01, delta / 1000).epsilon_upper for d in ("remove", "add")}
        print(tag, q, T, delta, round(max(e.values()), 4), flush=True)
evals(pickle.load(open('/tmp/h21t/tab6.pkl', 'rb')), "tab6")
if len(sys.argv) > 1:
    B.base_pair = lambda *a, **k: None  # DIAGNOSTIC ONLY (not a bound): drop every coordinate ≤ a_0
    tab = B.build_table(1.0, 1.5, 1.5, a0=0.03, ratio_low=1.03, ratio_high=1.005, high_from=0.5)
    evals(tab.top, "nobase3")
