"""``opbench report -o DIR``: the history of every machine as a static HTML site.

Writes ``DIR/index.html`` (each benchmark: latest value, trend sparkline, latest
change beyond the noise; machines side by side) and a page per benchmark under
``DIR/bench/`` (its history per machine: medians and intervals over commits,
fitted levels, steps and drifts marked, a tooltip with the commit and
environment; time and instruction counts on separate charts). The site needs
no server and fetches nothing: open ``DIR/index.html`` in a browser, or
publish the folder as it is (see ``opbench.analysis.report``); ``--redact`` leaves
out host names and absolute paths first. A damaged run is named on the index by
its path inside the history's folder.

Exit status: 0; 2 when there is no history (``--root``, ``$OPBENCH_BASELINE_DIR``
or ``.opbench``) or DIR cannot be written.
"""
from __future__ import annotations

import argparse

from opbench.integrations.cli import UsageError, command_parser
from opbench.stats import changepoints


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(subparsers, "report", "write the history as a static HTML site", __doc__)
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write")
    p.add_argument("--root", help="the baselines folder (default $OPBENCH_BASELINE_DIR or "
                                  ".opbench)")
    p.add_argument("--machine", action="append",
                   help="a machine id to include (repeatable; default: every machine)")
    p.add_argument("--z", type=float, default=changepoints.Z_MIN,
                   help="standard errors of the noise a change must reach to be marked "
                        "(default 5)")
    p.add_argument("--redact", action="store_true",
                   help="leave out host names and absolute paths (for a public site)")
    return p


def run(args: argparse.Namespace) -> int:
    from opbench.analysis import report

    try:
        out = report.write(args.output, root=args.root, machines=args.machine, z_min=args.z,
                           redact=args.redact)
    except ValueError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"cannot write {args.output}: {e}") from None
    print(f"wrote {out / 'index.html'}")
    return 0
