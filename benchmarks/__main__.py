"""``python -m benchmarks run [--quick] [--only NAME ...]`` and ``python -m benchmarks render``.

``run`` executes every benchmark module (see :mod:`benchmarks.common`), writes one JSON file per
benchmark, then ``render`` regenerates the tables and plots of ``benchmarks/README.md`` and the
Performance block of the top-level ``README.md`` from the JSON files alone. Generated text lives
between marker comments, so hand-written sections around them survive.

Full runs write to ``benchmarks/results`` (published, committed); ``--quick`` runs a small
version of each benchmark and writes to ``benchmarks/results/quick`` unless ``--out`` says
otherwise, and touches the READMEs only when their paths are given explicitly.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from . import common

HERE = Path(__file__).resolve().parent
NOT_BENCHMARKS = {"__init__", "__main__", "common", "corpus"}
# Preferred order in the README; anything else found follows alphabetically.
ORDER = ("ingest_scale", "cold_start", "first_run", "kernel_floor", "peers", "real_corpus",
         "quality", "fact_audit", "retrieval", "scale", "embed_speed")


def discover() -> list[str]:
    """Names of the benchmark modules present (a module with a ``run`` function)."""
    found = sorted(p.stem for p in HERE.glob("*.py")
                   if p.stem not in NOT_BENCHMARKS and not p.stem.startswith("_"))
    ranked = [n for n in ORDER if n in found] + [n for n in found if n not in ORDER]
    return [n for n in ranked if hasattr(load(n), "run")]


def load(name: str) -> ModuleType:
    return importlib.import_module(f"benchmarks.{name}")


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in a benchmark result")


def run_one(name: str, quick: bool, out_dir: Path) -> Path:
    module = load(name)
    print(f"== {name}{' (quick)' if quick else ''}", flush=True)
    start = time.perf_counter()
    body = module.run(quick)
    result = {
        "name": name,
        "title": getattr(module, "TITLE", name),
        "quick": quick,
        "date": common.now(),
        "duration_s": round(time.perf_counter() - start, 2),
        "command": f"python -m benchmarks run --only {name}" + (" --quick" if quick else ""),
        "machine": common.machine(),
        "versions": common.versions(),
        "git": common.git_commit(),
        "parameters": body.get("parameters", {}),
        "figures": body.get("figures", {}),
        "tables": body.get("tables", []),
        "notes": body.get("notes", []),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=_json_default) + "\n")
    print(f"   wrote {path} in {result['duration_s']} s", flush=True)
    return path


def load_results(results_dir: Path) -> list[dict[str, Any]]:
    results = []
    for path in sorted(results_dir.glob("*.json")):
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as err:
            print(f"   skipping unreadable {path}: {err}", file=sys.stderr)
    rank = {n: i for i, n in enumerate(ORDER)}
    return sorted(results, key=lambda r: (rank.get(r.get("name", ""), len(ORDER)),
                                          r.get("name", "")))


def render(results_dir: Path, readme: Path | None, root_readme: Path | None) -> list[Path]:
    """Regenerate plots and Markdown blocks from the stored JSON results."""
    results = load_results(results_dir)
    written: list[Path] = []
    sections: dict[str, str] = {}
    for result in results:
        name = result["name"]
        images: list[Path] = []
        try:
            module = load(name)
        except ImportError:
            module = None
        if module is not None and hasattr(module, "plot"):
            try:
                images = list(module.plot(result, results_dir))
            except Exception:  # a broken plot must not lose the tables
                traceback.print_exc()
        written += images
        sections[name] = section_markdown(result, images, readme)
    if readme is not None:
        text = readme.read_text() if readme.exists() else README_HEAD
        text = common.replace_block(text, "<!-- bench:machine:start -->",
                                    "<!-- bench:machine:end -->", machine_markdown(results))
        for name, body in sections.items():
            text = common.replace_block(text, f"<!-- bench:{name}:start -->",
                                        f"<!-- bench:{name}:end -->", body)
        readme.write_text(text)
        written.append(readme)
    if root_readme is not None:
        text = root_readme.read_text() if root_readme.exists() else "# arrowdedup\n"
        text = common.replace_block(text, "<!-- perf:start -->", "<!-- perf:end -->",
                                    performance_markdown(results))
        root_readme.write_text(text)
        written.append(root_readme)
    return written


README_HEAD = """# Benchmarks

Every figure below is generated by `python -m benchmarks run` (or `make bench`) from the JSON
files in `benchmarks/results/`, which also record the machine, the library versions, the git
commit and the parameters of each run. Do not edit between the `bench:` markers by hand.
"""


def machine_markdown(results: list[dict[str, Any]]) -> str:
    if not results:
        return "_No results yet: run `python -m benchmarks run`._"
    m = results[0]["machine"]
    commits = sorted({(r["git"]["commit"] or "?")[:10] + ("+dirty" if r["git"]["dirty"] else "")
                      for r in results})
    dates = sorted(r["date"] for r in results)
    return (f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB RAM, {m['os']}, "
            f"Python {m['python']}.{memory_return_markdown(results)} Commits: "
            f"{', '.join(commits)}. Runs from {dates[0]} to {dates[-1]}.")


def memory_return_markdown(results: list[dict[str, Any]]) -> str:
    """How the machine of the newest result that recorded it returns memory (results written
    before it was recorded say nothing)."""
    recorded = [r for r in results if "memory_return" in r["machine"]]
    if not recorded:
        return ""
    m = max(recorded, key=lambda r: r["date"])["machine"]["memory_return"]
    if m.get("free_page_reporting"):
        order = m.get("page_reporting_order")
        size = f"{4 << order} KiB blocks" if isinstance(order, int) else "blocks"
        text = (f" Free page reporting on: freed memory goes back to the host in {size}, so "
                "fresh memory costs a host fault on first touch.")
    else:
        text = " No free page reporting."
    thp = m.get("transparent_hugepages")
    return text + (f" Transparent huge pages: {thp}." if thp else "")


def section_markdown(result: dict[str, Any], images: list[Path], readme: Path | None) -> str:
    lines = [f"### {result['title']}", ""]
    if result.get("quick"):
        lines += ["_Quick run (small parameters), not the published figures._", ""]
    lines.append(f"Reproduce: `{result['command']}` — {result['date']}, commit "
                 f"`{(result['git']['commit'] or '?')[:10]}`, took {result['duration_s']} s.")
    params = result.get("parameters") or {}
    if params:
        lines += ["", "Parameters: " + ", ".join(f"`{k}`={common.fmt(v)}"
                                                 for k, v in params.items())]
    for t in result.get("tables", []):
        lines += ["", common.markdown_table(t)]
    for note in result.get("notes", []):
        lines += ["", f"- {note}"]
    for image in images:
        rel = image.name
        if readme is not None:
            try:
                rel = image.resolve().relative_to(readme.resolve().parent).as_posix()
            except ValueError:
                rel = image.as_posix()
        lines += ["", f"![{image.stem}]({rel})"]
    return "\n".join(lines)


def performance_markdown(results: list[dict[str, Any]]) -> str:
    bullets: list[str] = []
    for result in results:
        try:
            module = load(result["name"])
        except ImportError:
            continue
        if hasattr(module, "headline"):
            bullets += [f"- {line}" for line in module.headline(result)]
    if not bullets:
        return "_No benchmark results yet: run `make bench`._"
    m = results[0]["machine"]
    return "\n".join([
        "## Performance",
        "",
        "Generated from `benchmarks/results/*.json` by `python -m benchmarks run`; details, "
        "tables and plots in [benchmarks/README.md](benchmarks/README.md).",
        "",
        *bullets,
        "",
        f"Measured on {m['cpu']} ({m['cores']} cores, {m['memory_gb']} GB RAM), "
        f"Python {m['python']}. Reproduce with `make bench` "
        "(or `python -m benchmarks run [--only NAME]`).",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    sub = parser.add_subparsers(dest="cmd", required=True)
    run_p = sub.add_parser("run", help="run benchmarks, write JSON, regenerate the READMEs")
    run_p.add_argument("--quick", action="store_true", help="small, fast versions")
    run_p.add_argument("--only", action="append", default=[], metavar="NAME",
                       help="run only this benchmark (repeatable)")
    ren_p = sub.add_parser("render", help="regenerate READMEs and plots from stored JSON")
    sub.add_parser("list", help="list the benchmarks found")
    for p in (run_p, ren_p):
        p.add_argument("--out", type=Path, default=None, help="results directory")
        p.add_argument("--readme", type=Path, default=None, help="benchmarks README to update")
        p.add_argument("--root-readme", type=Path, default=None,
                       help="project README whose Performance block to update")
    args = parser.parse_args(argv)
    if args.cmd == "list":
        print("\n".join(discover()))
        return 0
    quick = bool(getattr(args, "quick", False))
    out = args.out or (common.RESULTS / "quick" if quick else common.RESULTS)
    readme, root_readme = args.readme, args.root_readme
    if not quick and args.out is None:
        readme = readme or HERE / "README.md"
        root_readme = root_readme or common.ROOT / "README.md"
    failed: list[str] = []
    if args.cmd == "run":
        names = discover()
        unknown = [n for n in args.only if n not in names]
        if unknown:
            parser.error(f"unknown benchmark(s) {unknown}; found: {', '.join(names)}")
        for name in args.only or names:
            try:
                run_one(name, quick, out)
            except Exception:
                traceback.print_exc()
                failed.append(name)
    for path in render(out, readme, root_readme):
        print(f"   rendered {path}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
