"""docs/reliability.md, rendered from the adversarial suite's counters (see conftest.py)."""

from __future__ import annotations

import textwrap

AREAS = {
    "fuzzing": (
        "inputs",
        "Recipes, hardware, suites, canaries, packets and the runner importers' inputs, from the "
        "real files in data/ and packets/, mutated by hypothesis (derandomized, bounded): keys "
        "deleted, types changed, unknown keys, unicode, huge and non-finite numbers, deep nesting, "
        "truncation, duplicate keys, binary garbage, alias bombs. Each loaded, or was refused by an "
        "error naming the file and the line "
        "or field; never a traceback, a hang or a write.",
    ),
    "tampering": (
        "inputs",
        "Sealed packets edited after sealing, renamed, copied, reformatted. `make verify` and "
        "`make site` refuse every content change, naming the file; a packet's bytes are its "
        "canonical form, so another key order or whitespace is refused too, and re-encoding the "
        "content gives back the sealed bytes and digest.",
    ),
    "forgery": (
        "inputs",
        "A forger with the project's code but not its private keys: packets edited and re-sealed "
        "with a key of their own (or beside the original signature file), through `python -m "
        "catalog.verify` and `python -m builder build` as subprocesses, against the published "
        "catalog and with `--allow-unsigned` (where the forger's key is admitted as a local one "
        "and only the packet's content can refuse it). Each was refused with one error line naming "
        "the packet; nothing was published.",
    ),
    "listed key": (
        "inputs",
        "A lab that lists its keys in data/keys.yaml exactly as docs/packets.md says and seals with the "
        "project's own `seal`: what no measurement produced, in eight classes (1 facts come from the "
        "catalog, not the packet; 2 physics both ways; 3 independence; 4 imports keep their gates; "
        "5 the workload is what it says; 6 identity is one story; 7 keys and dates; 8 bounds on size), "
        "through `python -m catalog.verify` and `python -m builder build` as subprocesses, published "
        "and with `--allow-unsigned`. The signature holds, so each was refused by what it says: one "
        "error line naming the packet file and the field, nothing published; a control packet sealed "
        "honestly by the same key was accepted beside every class.",
    ),
    "injection": (
        "inputs",
        "Script tags, HTML, `javascript:` links, attribute-breaking quotes and template syntax in "
        "every free-text field of recipes, hardware, suites and packets. The built pages, the JSON "
        "API and the sitemap carry them only as text; in headless Chromium no injected script ran "
        "on any page.",
    ),
    "paths": (
        "inputs",
        "Slugs and ids with `../`, absolute paths, fullwidth solidus and Cyrillic look-alikes, "
        "variant names that climb out of runs/, a hostile output folder. Every one is refused; "
        "the builder never writes outside its output folder.",
    ),
    "runner faults": (
        "faults",
        "A fake vLLM driven through runner.server.VllmServer and the runner's campaign code: the "
        "server exits during start, mid-suite and ignores SIGTERM at teardown, never becomes "
        "ready, finds its port taken (by a bare listener, or by another working vLLM server); the "
        "disk fills while a packet, an attempt or the site is written; SIGINT and SIGTERM reach "
        "the runner mid-suite. Each left no process, no partial packet, a clear message and "
        "its logs under runs/.",
    ),
    "secrets": (
        "inputs",
        "Tokens and keys in the environment, in a recipe's base_env and as --api-key: none appears "
        "in a packet, a server log under runs/, the console or a built page; a packet carrying one "
        "is refused.",
    ),
}

FINDINGS = [
    (
        "A YAML alias bomb hung validation; 100,000 nested brackets raised RecursionError out of "
        "PyYAML and json; a 100,000-digit integer raised ValueError: tracebacks, not errors.",
        "The loader bounds nesting (64 levels), alias expansion (1,000,000 values) and integer length.",
    ),
    (
        "`.inf` in hardware.yaml and `1e999` in a packet passed `make verify`, then crashed the "
        "builder; a packet holding one could not be re-hashed.",
        "Every model refuses inf and NaN.",
    ),
    ("A finite but huge figure (1e300) crashed the number formatter.", "The decimal context grows to fit."),
    (
        "A lone surrogate escape (`\\ud800`) in a packet crashed `make verify` with UnicodeEncodeError.",
        "The loader refuses it, naming the file and the field.",
    ),
    (
        "A named pipe called `data/models/x.yaml` made `make verify` and `make site` hang.",
        "Only regular files are read.",
    ),
    (
        "Errors without a place: an empty file, a whole-model check (`opt-in list names unknown "
        "feature`) reported at the model's root, a control character's error split over two lines.",
        "Line 1 for the document, FieldError names the field, one line with the line number.",
    ),
    (
        "A schema 2 packet holding a lone surrogate escape or bytes that are not UTF-8 was refused as "
        "`Invalid JSON` with no line or field: the strict packet reader skipped the loader's checks.",
        "read_packet reports them as every other file does: the field holding the escape, or `not UTF-8` "
        "with the byte.",
    ),
    (
        "Finding the line of an error in a 1.2 MB packet took 5 s (PyYAML composed the whole file).",
        "JSON is walked with the C decoder: 17 ms.",
    ),
    (
        "`python -m runner import-bench`/`import-reference` input that their own models accept but "
        "the packet refuses (a duration of 1e999, `--cards 0`, a gate with 15 exact of 12) ended in "
        "a pydantic traceback.",
        "One error line naming the input file and the packet field; nothing written.",
    ),
    (
        "A full disk while the runner sealed a packet or saved an attempt, or the builder published, "
        "ended in a traceback.",
        "`write_file` reports `cannot write: No space left on device` for the file.",
    ),
    (
        "A recipe's HF_TOKEN and `--api-key` were sealed into the packet and printed on the console; "
        "the server's startup line put the key in runs/ logs and failed attempts' log tails; the "
        "recipe page published them.",
        "catalog.model.secrets: the values are redacted in packets, on the console, in server logs and tails, "
        "and on pages.",
    ),
    (
        "A packet written by hand (or another tool) with a real token in its arm config verified, "
        "and packets are published byte for byte.",
        "An arm config's credential values must read `<redacted>`; verify names the field.",
    ),
    (
        "Copy-paste command injection: an environment variable name `A=1 touch x; B` in a recipe, "
        "and a `$HOME/` argument holding `$( )` (kept in double quotes).",
        "Env names must be shell names; such `$HOME/` arguments are single-quoted.",
    ),
    ("A recipe variant named `../../../x` made the runner write outside runs/.", "`--variant` must be a slug."),
    (
        "`--vllm-python ./python` ran a python found on PATH, not the file preflight had checked.",
        "The path is made absolute.",
    ),
    (
        "SIGTERM to the runner left its vLLM servers (each in its own session) running; Ctrl-C said "
        "only `interrupted`.",
        "SIGTERM unwinds like Ctrl-C; the message says no packet was written and names runs/<campaign>/.",
    ),
    (
        "When another session's vLLM server took the port between the runner's check and its own "
        "server's bind, the health poll got that server's answers: the runner measured it as its own.",
        "Ready needs a member of the server's own process group to hold the listening socket.",
    ),
    (
        "Ctrl-C was lost when it landed while the runner printed progress (asyncio.wait_for on Python "
        "3.11 swallows it): the campaign ran on and sealed a packet.",
        "The client's timeouts use asyncio.timeout.",
    ),
]


def render_report(counts: dict[tuple[str, str], int], tests: int, gaps: list[str] | None = None) -> str:
    """`gaps`: the attacks marked xfail (known not to be refused yet), listed as such."""
    lines = [
        "# Reliability: the adversarial suite",
        "",
        "Generated by `make reliability` from a full run of `tests/adversarial/`, every test in it",
        "passing; do not edit by hand (a test fails when this file is stale). Every count is of inputs",
        "actually fed to a real entry point (the loader, `python -m catalog.verify`, `python -m builder",
        "build`, the runner) or of faults actually injected, and every one of them survived.",
        "",
    ]
    totals = {"inputs": 0, "faults": 0}
    for area, (kind, summary) in AREAS.items():
        rows = sorted((attack, n) for (a, attack), n in counts.items() if a == area)
        if not rows:
            continue
        subtotal = sum(n for _, n in rows)
        totals[kind] += subtotal
        lines += [f"## {area.capitalize()}", "", *textwrap.wrap(summary, 100), ""]
        lines += [f"| attack | {kind} | survived |", "|---|---:|---:|"]
        lines += [f"| {attack} | {n} | {n} |" for attack, n in rows]
        lines += [f"| **total** | **{subtotal}** | **{subtotal}** |", ""]
    lines += [
        "## Totals",
        "",
        f"- {totals['inputs']} hostile inputs tried, {totals['inputs']} survived",
        f"- {totals['faults']} faults injected into the runner, {totals['faults']} survived",
        f"- {tests} tests passed",
        "",
    ]
    if gaps:
        lines += [
            "## Not refused yet",
            "",
            "Attacks the suite tries that still get through, marked xfail (strict) until the check lands:",
            "",
            *[f"- {gap}" for gap in gaps],
            "",
        ]
    lines += [
        "## What broke, and the fix",
        "",
        "| what the suite found | fix |",
        "|---|---|",
    ]
    lines += [f"| {found} | {fix} |" for found, fix in FINDINGS]
    return "\n".join(lines) + "\n"
