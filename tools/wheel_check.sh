#!/usr/bin/env bash
# Packaged like a library people depend on: build trnplan's wheel, install it into a fresh venv
# (torch==2.13.0 first: on this project's machines that is the CPU build on local disk), and plan,
# run and verify a transform from outside the source tree, so nothing is imported from the checkout.
# Also checks that the wheel carries the LICENSE and the py.typed marker (PEP 561).
# `make wheel-check`; .ci/run runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
torch_req=${TORCH:-torch==2.13.0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$python" -m venv "$tmp/venv"
pip=("$tmp/venv/bin/python" -m pip --quiet --disable-pip-version-check)
"${pip[@]}" install "$torch_req"
"${pip[@]}" wheel --no-deps -w "$tmp/dist" "$root"
wheel=$(ls "$tmp"/dist/trnplan-*.whl)
"$tmp/venv/bin/python" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
missing = [want for want in ("trnplan/py.typed", "LICENSE") if not any(n.endswith(want) for n in names)]
if missing:
    sys.exit(f"wheel check: {sys.argv[1]} lacks {missing}")
PY
"${pip[@]}" install "$wheel"
cd "$tmp"   # not the checkout: the installed wheel is what gets imported
"$tmp/venv/bin/python" - <<'PY'
import numpy as np, torch, trnplan
from trnplan.core.accuracy import DEFAULT_TOL

assert "site-packages" in trnplan.__file__, f"imported the checkout, not the wheel: {trnplan.__file__}"
plan = trnplan.plan_many(256, batch=4, cache=None)
x = torch.randn(4, 256, dtype=torch.complex64)
ref = np.fft.fft(x.numpy().astype(np.complex128))
err = np.linalg.norm(plan.execute(x).numpy() - ref) / np.linalg.norm(ref)
bound = DEFAULT_TOL["fp32"]
assert err <= bound, f"wheel check: error {err:.2e} over the fp32 bar {bound:.1e}"
print(f"wheel check: {trnplan.__version__} from {trnplan.__file__}: {plan.tree} error {err:.2e} <= {bound:.1e}")
PY
"$tmp/venv/bin/trnplan" plan 64 --batch 2 --verify --cache-dir "$tmp/cache" >/dev/null
# torch loads the wheel's torch.backends entry point at `import torch`: TRNPLAN_INSTALL=1 installs
# trnplan's torch.fft kernels (code you cannot edit); unset, trnplan is not even imported
probe='import sys, torch; m = sys.modules.get("trnplan"); print(m.installed() if m else "not imported")'
got=$(TRNPLAN_INSTALL=1 TRNPLAN_CACHE_DIR="$tmp/cache" "$tmp/venv/bin/python" -c "$probe")
[[ "$got" == "['XLA', 'PrivateUse1']" ]] || { echo "wheel check: TRNPLAN_INSTALL=1 import torch gave $got" >&2; exit 1; }
got=$(env -u TRNPLAN_INSTALL "$tmp/venv/bin/python" -c "$probe")
[[ "$got" == "not imported" ]] || { echo "wheel check: import torch without TRNPLAN_INSTALL gave $got" >&2; exit 1; }
# the commands trnplan's messages and help tell an installed user to run (tests/test_cli.py,
# test_every_hint_works_from_the_wheel, checks no message names a file of the checkout instead)
"$tmp/venv/bin/trnplan" precompile --help | grep -q '^  \[\[plan\]\]'
"$tmp/venv/bin/trnplan" precompile c2c:64@2 r2c:16x16@2 --backward --cache-dir "$tmp/cache" --quiet >/dev/null
TRNPLAN_CACHE_DIR="$tmp/cache" TRNPLAN_WISDOM_ONLY=1 "$tmp/venv/bin/python" -c "
import torch, trnplan
x = torch.randn(2, 16, 16, requires_grad=True)
trnplan.plan_many((16, 16), 2, kind='r2c')(x).abs().sum().backward()  # the precompiled adjoint: no WisdomMiss"
"$tmp/venv/bin/trnplan" calibrate --quick --seconds 2 --cache-dir "$tmp/cache" >/dev/null
echo "wheel check: ok (LICENSE, py.typed, import, plan, CLI, precompile --backward + wisdom_only training, calibrate)"
