"""What `gate run`, `gate decide`, `gate merge` and `gate validate` print for a person.

Read from the `gate.model.result.Result` (what result.json holds). The state and its meaning come first,
then the blockers with their case ids, the slice table, the cost and where the files are. On a
terminal `rich` adds colour and layout; piped or in a CI log the same text is plain (no ANSI
escape, no Markdown: that stays in report.md, summary.md and the PR comment).

Every untrusted string (case ids, slice names, messages, judge reasons) passes through
`gate.model.escape.log_text` and reaches rich as a `Text`, never as markup, so `[red]` or `::error::`
in a case is shown as written and can never style the output or start a log line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gate.model.escape import log_text, styled
from gate.model.loading import read_yaml_mapping
from gate.model.money import money
from gate.model.owners import owner_text
from gate.model.paths import shown_path
from gate.model.retirement import MIGRATION
from gate.model.wording import plural
from gate.report.markdown import (
    LIST_ONLY_KINDS,
    STATE_MEANING,
    STATE_ORDER,
    blocker_message,
    blockers_heading,
    shard_text,
    state_meaning,
    withheld_text,
)
from gate.report.next_steps import CALIBRATION_PARTITION, next_steps
from gate.report.product import heading, method_line, slice_views
from gate.report.sections import (
    NOT_JUDGED,
    batch_line,
    calibration_lines,
    human_text,
    not_needed_term,
    people_labels,
    retirement_line,
    shows_slice_table,
)

if TYPE_CHECKING:
    from gate.model.result import CaseRow, Result

STATE_STYLE = {
    "passed": "bold green",
    "quality_failed": "bold red",
    "evaluation_incomplete": "bold yellow",
    "review_required": "bold magenta",
}
MAX_IDS = 10
MAX_DETAILED = 5
MAX_REASON = 160


def make_console(stream: IO[str]) -> Console:
    """Colour and layout on a terminal; plain text (rich decides nothing) when piped or in CI."""
    tty = stream.isatty()
    plain = not styled(stream)  # NO_COLOR: no colour and no bold either, no escape at all
    return Console(
        file=stream,
        force_terminal=tty,
        no_color=plain,
        color_system=None if plain else "auto",
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=not tty,  # a log line is never cut at an invented width
        width=None if tty else 100,
    )


def safe_text(text: object, limit: int | None = None, style: str = "") -> Text:
    return Text(log_text(text, limit), style=style)


# A message (a blocker's with its fix, a hint, an error) shows whole: only a runaway one (a hostile
# case id, a provider's page of text) is cut, and then the line says where the whole of it is.
MAX_MESSAGE = 2000


def whole_text(text: object, where: str, limit: int = MAX_MESSAGE, style: str = "") -> Text:
    """`text` as written; past `limit` characters cut between words, saying it is in `where`."""
    s = str(text)
    if len(s) <= limit:
        return safe_text(s, style=style)
    head = s[:limit].rsplit(" ", 1)[0] or s[:limit]
    return Text.assemble(safe_text(head, style=style), f" … (cut here: the whole text is in {where})")


def _ids(ids: Sequence[Any], limit: int = MAX_IDS) -> Text:
    out = Text(", ").join(safe_text(i, style="cyan") for i in ids[:limit])
    if len(ids) > limit:
        out.append(f" and {len(ids) - limit} more")
    return out


def _case_detail(c: CaseRow, audited: str | None = None) -> Text:
    if c.bucket == "errored":
        return Text.assemble(
            "evaluator error ", safe_text(c.error_kind), ": ", whole_text(c.error_message or "", "records.jsonl")
        )
    if c.bucket == "withheld":
        return Text("withheld (no reference evidence)")
    if c.bucket == "unrun":
        return Text("not judged")
    if c.verdict is None:  # not needed: decided before it was judged (a gating check, a stop)
        return Text.assemble("human ", safe_text(human_text(c.human_label, audited), style="bold"), f", {NOT_JUDGED}")
    out = Text.assemble(
        "human ",
        safe_text(human_text(c.human_label, audited), style="bold"),
        ", judge ",
        safe_text(c.verdict, style="bold"),
    )
    if len(c.labels) > 1:
        out.append_text(Text.assemble(" (votes: ", Text(", ").join(safe_text(v) for v in c.labels), ")"))
    if c.reason:
        out.append_text(Text.assemble(' — "', whole_text(c.reason, "records.jsonl", MAX_REASON, style="italic"), '"'))
    return out


def headline(result: Result) -> Text:
    state = result.state
    return Text.assemble((state, STATE_STYLE[state]), f" (exit {result.exit_code}): ", state_meaning(result))


def _blockers(result: Result, console: Console) -> None:
    blockers = result.blockers
    if not blockers:
        console.print("Blockers: none")
        return
    cases = {c.case_id: c for c in result.cases}
    people = people_labels(result)
    console.print(Text(f"{blockers_heading(result)} ({len(blockers)})", style="bold"))
    for state in STATE_ORDER:
        group = [b for b in blockers if b.state == state]
        if group:
            console.print(Text.assemble("  ", (state, STATE_STYLE[state]), f" ({len(group)})"))
        for b in group:
            where = Text.assemble(" in slice ", safe_text(b.slice, style="cyan")) if b.slice else Text()
            kind = (log_text(b.kind), "bold")
            owner = owner_text(b)
            if owner:
                where = Text.assemble(where, " owner ", safe_text(owner, style="magenta"))
            print_indented(console, 4, Text.assemble(kind, where, ": ", whole_text(blocker_message(b), "result.json")))
            ids = b.case_ids
            judged = [i for i in ids if i in cases and cases[i].bucket not in ("unrun", "withheld")]
            detailed = [] if b.kind in LIST_ONLY_KINDS else judged[:MAX_DETAILED]
            for i in detailed:
                print_indented(
                    console, 6, Text.assemble(safe_text(i, style="cyan"), ": ", _case_detail(cases[i], people.get(i)))
                )
            rest = [i for i in ids if i not in detailed]
            if rest:
                label = f"{plural(len(rest), 'more case')}: " if detailed else "cases: "
                print_indented(console, 6, Text.assemble(label, _ids(rest)))


def print_indented(console: Console, left: int, text: Text) -> None:
    """Wrapped lines keep the indent on a terminal; a log line stays one line."""
    console.print(Padding(text, (0, 0, 0, left)) if console.is_terminal else Text(" " * left) + text)


SLICE_COLUMNS = ("false_pass", "false_fail", "true_pass", "true_fail", "errors", "review", "unrun")
TABLE_WIDTH = 100  # the slice table fits a terminal this wide


def _slices(result: Result, console: Console) -> None:
    """The metric table, one row a slice. A slice name too wide for the table to fit 100 columns
    stands whole on its own line, its figures on the row under it (never cut with an ellipsis)."""
    if not shows_slice_table(result):
        return
    rows = [(name, tally.written()) for name, tally in result.slices.items()]
    widths = [max(len(c), *(len(str(t[c])) for _, t in rows)) for c in SLICE_COLUMNS]
    room = TABLE_WIDTH - sum(w + 2 for w in widths)  # each figure column and the two spaces before it
    name_w = max([len("slice"), *(len(name) for name, _ in rows if len(name) <= room)])

    def part(header: bool) -> Table:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), show_header=header)
        table.add_column("slice", no_wrap=True, width=name_w)
        for col, w in zip(SLICE_COLUMNS, widths, strict=True):
            table.add_column(col.replace("_", " "), justify="right", no_wrap=True, width=w)
        return table

    console.print(Text("Slices (controls excluded)", style="bold"))
    table = part(header=True)
    for name, t in rows:
        cells = [
            Text(str(t[c]), style="bold red" if c in ("false_pass", "false_fail") and t[c] else "")
            for c in SLICE_COLUMNS
        ]
        if len(name) > name_w:  # whole, above its figures; the table goes on under it
            console.print(table, soft_wrap=False)
            console.print(safe_text(name, style="cyan"))
            table = part(header=False)
            table.add_row("", *cells)
            continue
        table.add_row(safe_text(name, style="cyan"), *cells)
    console.print(table, soft_wrap=False)
    console.print()


VERDICT_STYLE = {
    "passed": "bold green",
    "exceeded": "bold red",
    "inconclusive": "bold magenta",
    "judge_unfit": "bold magenta",
    "incomplete": "bold yellow",
}


def _product(result: Result, console: Console) -> None:
    """A product lane's slices, one line each (a table would cut them at 100 columns): the verdict,
    the corrected failure rate with its interval against the limit, k of n, the judge's Se and Sp
    with counts; then what would decide an inconclusive slice, and the base comparison."""
    product = result.product
    if product is None:
        return
    console.print(Text(heading(product), style="bold"))
    for v in slice_views(product, result.waived):
        verdict = Text(log_text(v.verdict_text), style=VERDICT_STYLE.get(v.verdict, ""))
        rate = f"failure rate {v.rate} (interval {v.interval})" if v.interval != "–" else "no failure rate"
        line = Text.assemble(
            safe_text(v.name, style="cyan"),
            ": ",
            verdict,
            f"; {rate} against a limit of {v.limit}; {v.judged_fail} judged fail; judge Se {v.se}, Sp {v.sp}",
        )
        print_indented(console, 2, line)
        if v.decided_by_person:
            print_indented(console, 4, safe_text(f"decided by a person: {v.decided_by_person}", 600))
        if v.audit:
            print_indented(console, 4, safe_text(v.audit, 800))
        if v.zero:
            print_indented(console, 4, safe_text(v.zero, 800))
        if v.look:
            print_indented(console, 4, safe_text(v.look, 600))
        if v.plan:
            print_indented(console, 4, safe_text(v.plan, 800))
        if v.hint:
            print_indented(console, 4, whole_text(v.hint, "result.json"))
        if v.base:
            shown = ", ".join(v.turned_fail[:MAX_IDS])
            more = f" and {len(v.turned_fail) - MAX_IDS} more" if len(v.turned_fail) > MAX_IDS else ""
            turned = f"; turned fail: {shown}{more}" if v.turned_fail else ""
            print_indented(console, 4, whole_text(f"against the base: {v.base}{turned}", "result.json"))
    print_indented(console, 2, safe_text(method_line(product)))
    console.print()


def _cost(result: Result, console: Console) -> None:
    cost = result.cost
    cur = cost.currency
    line = Text.assemble(("Cost: ", "bold"), money(cost.total, cur))
    if result.limits is not None:
        line.append(f" of a {money(result.limits.max_total_cost, cur)} boundary")
    line.append(
        f"; {cost.input_tokens} input / {cost.output_tokens} output tokens, "
        f"{plural(cost.http_attempts, 'HTTP attempt')} ({plural(cost.retries, 'retry', 'retries')}), "
        f"{plural(cost.cached_calls, 'judgment')} from cache"
    )
    console.print(line)
    batch = batch_line(result)
    if batch is not None:
        console.print(safe_text(f"  {batch}"))
    unanswered, missing = cost.unanswered_attempts, cost.usage_missing
    if unanswered or missing:
        console.print(
            f"  {plural(unanswered, 'attempt')} unanswered and {missing} answered without usage count at their reserved "
            f"upper bound: budget used {money(cost.spent, cur)}"
        )


def _counts(result: Result) -> Text:
    n = result.counts
    return Text(
        f"Cases: {n.eligible} eligible = {n.completed} completed + {n.errored} "
        f"errored + {n.withheld} withheld + {n.unrun} unrun{not_needed_term(n.not_needed)}; {n.review} need review"
    )


OUTPUT_NOTES = (
    ("result.json", "the decision, for scripts"),
    ("report.md", "the PR comment (Markdown)"),
    ("summary.md", "the job summary (Markdown)"),
    ("junit.xml", "one test per case"),
    ("product.svg", "each product slice's failure-rate interval against its limit (a picture)"),
    ("records.jsonl", "every judgment, for decide, resume and calibrate"),
    ("certification-entry.json", "append to the certification ledger once people accept it"),
    ("batch.json", "the provider batch submitted from here: collect it with the same --out (`--batch collect`)"),
)


# A step is our own text around the paths the user typed: clipped only against a runaway path, never
# mid-command for an ordinary one (a clipped command copied into a shell does something else).
MAX_STEP = 1500


def calibration_lane(policy: str | Path | None) -> str | None:
    """The policy's lane over the calibration partition (only it, if one does), for the steps that
    say how to calibrate; None when the policy cannot be read or has none."""
    if policy is None:
        return None
    try:
        lanes = read_yaml_mapping(Path(policy), "policy").get("lanes")
    except Exception:  # the steps then say LANE: a policy that cannot be read was reported already
        return None
    if not isinstance(lanes, dict):
        return None
    over = {
        str(name): list(lane.get("partitions") or [])
        for name, lane in lanes.items()
        if isinstance(lane, dict) and CALIBRATION_PARTITION in (lane.get("partitions") or [])
    }
    return min(over, key=lambda name: (len(over[name]), name), default=None)


def _next_steps(result: Result, out_dir: Path | None, policy: str | Path | None, console: Console) -> None:
    # The steps' commands are in backticks for Markdown; a terminal shows them plain.
    steps = [
        step.replace("`", "")
        for step in next_steps(
            result,
            policy=shown_path(policy) if policy is not None else "POLICY",
            out=shown_path(out_dir) if out_dir is not None else "RUN",
            calibration_lane=calibration_lane(policy),
        )
    ]
    if not steps:
        return
    console.print()
    console.print(Text("Next steps", style="bold"))
    if not console.is_terminal:  # a log line stays one line
        for step in steps:
            console.print(Text.assemble("  - ", whole_text(step, "report.md", MAX_STEP)))
        return
    grid = Table.grid(padding=(0, 1, 0, 0))  # wrapped lines hang under the step's text, not its dash
    grid.add_column(no_wrap=True)
    grid.add_column()
    for step in steps:
        grid.add_row("  -", whole_text(step, "report.md", MAX_STEP))
    console.print(grid)


def print_outcome(
    result: Result,
    out_dir: Path | None,
    console: Console,
    policy: str | Path | None = None,
    run_dir: Path | None = None,
    cache: tuple[str, str] | None = None,
) -> None:
    """The whole terminal summary of a decision; `policy` (the path the user gave) fills the next
    steps, and so does `run_dir` (the run whose records were decided) when nothing was written.
    `cache`: where a run's judgment cache is, and what it is, listed last under Files."""
    console.print(headline(result))
    console.print(
        Text.assemble(
            "Policy ",
            safe_text(result.policy_id),
            " version ",
            safe_text(result.policy_version),
            ", lane ",
            safe_text(result.lane),
        )
    )
    shard = shard_text(result)
    if shard is not None:
        console.print(Text(shard, style="bold"))
    console.print(_counts(result))
    withheld = withheld_text(result)
    if withheld is not None:
        print_indented(console, 2, safe_text(withheld))
    retiring = retirement_line(result)
    if retiring is not None:
        print_indented(
            console, 0, Text.assemble(safe_text(retiring, style="bold yellow"), f" {MIGRATION} (docs/PROVIDERS.md)")
        )
    for i, line in enumerate(calibration_lines(result)):
        console.print(safe_text(f"  {line}" if i else line))
    console.print()
    _blockers(result, console)
    console.print()
    _product(result, console)
    _slices(result, console)
    _cost(result, console)
    for note in result.notes:
        console.print(Text.assemble("Note: ", safe_text(note)))
    _next_steps(result, out_dir if out_dir is not None else run_dir, policy, console)
    if out_dir is not None:
        console.print()
        written = [(shown_path(out_dir / name), what) for name, what in OUTPUT_NOTES if (out_dir / name).exists()]
        written += [cache] if cache is not None else []
        width = max((len(path) for path, _ in written), default=0)
        console.print(Text("Files", style="bold"))
        if not console.is_terminal:  # a log line stays one line
            for path, what in written:
                console.print(Text.assemble("  ", (log_text(path), "cyan"), " " * (width - len(path) + 2), what))
            return
        grid = Table.grid(padding=(0, 2, 0, 0))  # a wrapped description hangs under itself, not the path
        grid.add_column(no_wrap=True)
        grid.add_column()
        for path, what in written:
            grid.add_row(Text.assemble("  ", (log_text(path), "cyan")), what)
        console.print(grid)
        # On a screen the first line has scrolled away by now: the state again, last.
        console.print()
        console.print(headline(result))


# What a finding of each state means before any run: a linter's words, not a pull request's verdict.
LINT_MEANING = {
    "quality_failed": "a run would stop on these before calling the judge",
    "evaluation_incomplete": "a run would end without a complete verdict",
    "review_required": "a run would need a person for these",
}


def print_findings(
    findings: Sequence[Mapping[str, Any]], console: Console, header: Text | None = None, *, lint: bool = False
) -> None:
    """The worst state first, then each finding with its case ids. `lint` (`gate validate`): the
    header is the summary line ("valid: ..." or "N findings in ..."), and each state is said as what
    a run would do, not as a verdict on a change."""
    if header is not None:
        console.print(header)
    if not findings:
        if not lint:
            console.print(
                Text.assemble(
                    ("passed", STATE_STYLE["passed"]), ". No findings: the policy and dataset validate clean."
                )
            )
        return
    for state in STATE_ORDER:
        group = [f for f in findings if f.get("state") == state]
        if not group:
            continue
        if lint:
            console.print(Text.assemble((state, STATE_STYLE[state]), f" ({len(group)}): {LINT_MEANING.get(state, '')}"))
        else:
            console.print(
                Text.assemble(
                    (state, STATE_STYLE[state]), f": {plural(len(group), 'finding')}; {STATE_MEANING.get(state, '')}"
                )
            )
        for f in group:
            line = Text.assemble((log_text(f.get("kind")), "bold"), ": ", safe_text(f.get("message")))
            ids = list(f.get("case_ids") or [])
            if ids:
                line.append_text(Text.assemble(" [cases: ", _ids(ids), "]"))
            print_indented(console, 2, line)
