"""Strong and weak scaling of trnplan.distributed on gloo over loopback, 1 and 2 ranks.

    python bench/distributed.py [--ranks 1 2] [--repeats 10] [--markdown docs/distributed.md]
                                [--json bench/out/distributed.json]

Strong scaling: the same global transform on 1 and P ranks (fft2 1024², fftn 64³ slab and pencil,
1-D 2^20 six-step). Weak scaling: a fixed block per rank (the global axis 0 grows with P: fft2
(512·P)×1024, fftn (32·P)×64×64). Each rank runs one torch thread (the ranks share the machine's
cores). A row reports the median time per execute over ``--repeats`` calls after two warm-up
calls (each call between barriers; the time is the slowest rank's), the share of a call spent in
the all_to_all transposes (further calls timed step by step; it includes waiting for the slower
rank), speedup and efficiency against 1 rank
(strong: T1/TP and T1/(P·TP); weak: T1/TP), and the bytes each rank sends per execute. The
table is printed as markdown; ``--markdown FILE`` also writes it between the
``<!-- bench:distributed -->`` and ``<!-- /bench:distributed -->`` markers of FILE.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

#: (name, scaling, global shape as a function of P, layout)
CASES = [
    ("fft2 1024²", "strong", lambda p: (1024, 1024), "slab"),
    ("fftn 64³", "strong", lambda p: (64, 64, 64), "slab"),
    ("fftn 64³", "strong", lambda p: (64, 64, 64), "pencil"),
    ("fft 2^20", "strong", lambda p: (1 << 20,), "1d"),
    ("fft2 (512·P)×1024", "weak", lambda p: (512 * p, 1024), "slab"),
    ("fftn (32·P)×64²", "weak", lambda p: (32 * p, 64, 64), "slab"),
]


def _time_steps(plan, x):
    """One execute, step by step: (total seconds, seconds in transposes)."""
    from trnplan.distributed import _Transpose

    t = x.reshape(plan.batch, *(plan._mat_in_shape() if plan.problem.rank == 1 else plan.local_shape))
    comm = 0.0
    start = time.perf_counter()
    for step in plan._steps:
        t0 = time.perf_counter()
        t = step(t)
        if isinstance(step, _Transpose):
            comm += time.perf_counter() - t0
    return time.perf_counter() - start, comm


def _slowest(value: float) -> float:
    v = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(v, op=dist.ReduceOp.MAX)
    return float(v)


def _worker(rank, world, port, repeats, out_path, cache_dir):
    os.environ["TRNPLAN_CACHE_DIR"] = cache_dir
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    import trnplan.distributed as td

    rows = []
    for name, scaling, shape_of, layout in CASES:
        shape = shape_of(world)
        plan = td.plan_many(shape, layout="slab" if layout == "1d" else layout)
        x = torch.randn(plan.local_shape, dtype=torch.complex64)
        for _ in range(2):
            plan.execute(x)
        totals, shares = [], []
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            plan.execute(x)
            totals.append(_slowest(time.perf_counter() - t0))
        for _ in range(max(3, repeats // 2)):  # step by step: the share of one call in the transposes
            dist.barrier()
            total, comm = _time_steps(plan, x)
            shares.append(_slowest(comm) / _slowest(total))
        rows.append({"case": name, "scaling": scaling, "layout": layout, "ranks": world, "shape": list(shape),
                     "grid": list(plan.grid), "ms": statistics.median(totals) * 1e3,
                     "comm_share": statistics.median(shares), "bytes_sent": plan.bytes_sent})
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(rows, f)
    dist.barrier()
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(world: int, repeats: int) -> list[dict]:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        mp.start_processes(_worker, args=(world, _free_port(), repeats, out, os.path.join(tmp, "cache")),
                           nprocs=world, join=True, start_method="spawn")
        with open(out) as f:
            return json.load(f)


def _bytes(n: int) -> str:
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def table(rows: list[dict]) -> str:
    base = {(r["case"], r["layout"]): r["ms"] for r in rows if r["ranks"] == 1}
    lines = [("| case | scaling | layout | ranks (grid) | global shape | ms / execute | in transposes | "
              "speedup | efficiency | sent per rank |"),
             "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        t1 = base.get((r["case"], r["layout"]))
        p = r["ranks"]
        if t1 is None:
            speed = eff = "—"
        elif r["scaling"] == "strong":
            speed, eff = f"{t1 / r['ms']:.2f}×", f"{t1 / (p * r['ms']):.0%}"
        else:
            speed, eff = "—", f"{t1 / r['ms']:.0%}"
        lines.append(f"| {r['case']} | {r['scaling']} | {r['layout']} | {p} ({'×'.join(map(str, r['grid']))}) | "
                     f"{'×'.join(map(str, r['shape']))} | {r['ms']:.2f} | {r['comm_share']:.0%} | {speed} | {eff} | "
                     f"{_bytes(r['bytes_sent'])} |")
    return "\n".join(lines)


def write_markdown(path: str, text: str) -> None:
    start, end = "<!-- bench:distributed -->", "<!-- /bench:distributed -->"
    with open(path) as f:
        doc = f.read()
    if start not in doc or end not in doc:
        raise SystemExit(f"{path} has no {start} ... {end} markers; add them where the table should go")
    head, rest = doc.split(start, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(f"{head}{start}\n{text}\n{end}{tail}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--markdown", default=None, help="write the table between the bench markers of this file")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    rows = []
    for world in args.ranks:
        rows += run(world, args.repeats)
    machine = (f"{platform.machine()}, {os.cpu_count()} vCPU, torch {torch.__version__}, gloo over loopback, "
               f"1 torch thread per rank; {time.perf_counter() - started:.0f} s")
    text = f"{table(rows)}\n\nMeasured on {machine}."
    print(text)
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "rows": rows}, f, indent=1)
    if args.markdown:
        write_markdown(args.markdown, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
