"""The settings table in the docs is the one in trnplan/core/config.py (run by `make lint`).

1. ``config.SETTING_DOCS`` (default and meaning of each setting) names exactly the variables of
   ``config.SETTINGS`` (what ``check_environment`` parses), in the same order.
2. docs/user-guide.md's "Settings" table, between ``<!-- settings:start -->`` and
   ``<!-- settings:end -->``, is ``config.settings_table()`` word for word (``--write`` puts it there).
3. Every ``TRNPLAN_*`` name in the docs (docs/, README.md, examples/) and in trnplan/ is a setting,
   or one of the CI and test switches in :data:`SWITCHES`, each of which a script in .ci/ or a test
   still reads: a doc cannot name a variable nothing reads, and a new setting cannot be left out
   of the table (issue 26: there were two tables, each wrong differently).

Usage: python tools/check_settings.py [--write]   (exit 1 on a difference; --write regenerates 2.)
"""

from __future__ import annotations

import pathlib
import re
import sys

from trnplan.core import config

ROOT = pathlib.Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "user-guide.md"
START, END = "<!-- settings:start -->\n", "<!-- settings:end -->\n"
#: TRNPLAN_* variables that trnplan itself does not read: CI lanes' and tests' switches
SWITCHES = {
    "TRNPLAN_XLA_LANE": ".ci/xla_lane.sh: 0 skips the torch-xla lane",
    "TRNPLAN_XLA_VENV": ".ci/xla_lane.sh: the lane's virtualenv",
    "TRNPLAN_XLA_LANE_RUNNING": ".ci/xla_lane.sh sets it for tests/xla/conftest.py",
    "TRNPLAN_PY_LANE": ".ci/python_lane.sh: 0 skips the Python-version lane",
    "TRNPLAN_PY_LANE_ALLOW_MISSING": ".ci/python_lane.sh: an interpreter it cannot find is skipped",
    "TRNPLAN_PY_VENVS": ".ci/python_lane.sh: where its virtualenvs are",
    "TRNPLAN_SCIPY_FULL": "tests/test_interfaces.py: scipy's own fft test suite on trnplan's backend",
}
NAME = re.compile(r"TRNPLAN_[A-Z0-9_]*[A-Z0-9]")


def _texts(*globs: str) -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(errors="replace")
            for g in globs for p in sorted(ROOT.glob(g)) if p.is_file()}


def table_problems() -> list[str]:
    out = []
    if list(config.SETTING_DOCS) != list(config.SETTINGS):
        out.append(f"trnplan/core/config.py: SETTING_DOCS names {list(config.SETTING_DOCS)}, SETTINGS "
                   f"{list(config.SETTINGS)}: one entry each, in the same order")
    text = GUIDE.read_text()
    if text.count(START) != 1 or text.count(END) != 1:
        return [*out, f"{GUIDE.relative_to(ROOT)}: no single {START.strip()} ... {END.strip()} block"]
    have = text.split(START, 1)[1].split(END, 1)[0]
    if have != config.settings_table():
        out.append(f"{GUIDE.relative_to(ROOT)}: the Settings table is not config.settings_table(); run "
                   f"python tools/check_settings.py --write")
    return out


def name_problems() -> list[str]:
    out = []
    for path, text in _texts("docs/**/*.md", "README.md", "examples/**/*.py", "trnplan/**/*.py").items():
        for name in sorted(set(NAME.findall(text)) - set(config.SETTINGS) - set(SWITCHES)):
            out.append(f"{path}: {name} is neither a setting (trnplan/core/config.py SETTINGS) nor a CI switch "
                       f"(tools/check_settings.py SWITCHES)")
    readers = "\n".join(_texts(".ci/*", "tests/**/*.py").values())
    out += [f"tools/check_settings.py: SWITCHES lists {name}, which nothing in .ci/ or tests/ reads"
            for name in SWITCHES if name not in readers]
    return out


def write() -> None:
    text = GUIDE.read_text()
    head, rest = text.split(START, 1)
    GUIDE.write_text(head + START + config.settings_table() + END + rest.split(END, 1)[1])


def main(argv: list[str]) -> int:
    if "--write" in argv:
        write()
    problems = table_problems() + name_problems()
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
