"""The README and docs/COMMANDS.md match the program (issues 24 and 29).

Every `sh` block of the README and of docs/COMMANDS.md runs as written, one command a line, the
page's blocks in order in one scratch directory of the page's own that looks like a checkout (the
example policy copied; the Makefile, scripts, tests and .venv linked), with the virtualenv on PATH
and the offline provider on a free port ($GATE_DEMO_PORT). The two pages run as two tests, so
they run side by side. A trailing `# exit N` is the exit code a command must end with, else
0. A block whose first line starts with `# not run by tests/house/test_readme.py` is skipped; it must say
why, and every other `sh` block of docs/ must be so marked. The `text` block that opens
docs/COMMANDS.md is the synopsis: its flags must be each command's flags, no more, no fewer.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import gate_process
import pytest
from warm_launch import write_launcher

from gate.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
COMMANDS = ROOT / "docs" / "COMMANDS.md"
CALIBRATION = ROOT / "docs" / "CALIBRATION.md"
SKIP = "# not run by tests/house/test_readme.py"
RUN = (README, COMMANDS)  # the pages whose offline blocks run, each in a checkout of its own


def page_text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)]


def commands(block: str) -> list[tuple[str, int]]:
    """(command, expected exit code) for each line, continuation lines joined."""
    out: list[tuple[str, int]] = []
    pending = ""
    for line in block.splitlines():
        if pending:
            line = pending + " " + line.strip()
            pending = ""
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1].rstrip()
            continue
        command, _, comment = line.partition("#")
        if not command.strip():
            continue
        expected = re.search(r"\bexit (\d+)\b", comment)
        out.append((command.strip(), int(expected.group(1)) if expected else 0))
    return out


def sh_blocks(page: Path) -> list[str]:
    return [body for lang, body in blocks(page_text(page)) if lang == "sh"]


def says_why(body: str) -> bool:
    return len(body.splitlines()[0]) > len(SKIP) + 5


def runnable() -> list[tuple[Path, list[tuple[str, int]]]]:
    """The page and commands of each block the test runs."""
    found: list[tuple[Path, list[tuple[str, int]]]] = []
    for page in RUN:
        for body in sh_blocks(page):
            if body.startswith(SKIP):
                assert says_why(body), f"say why the block is not run: {body!r}"
                continue
            found.append((page, commands(body)))
    return found


def run_commands(page: Path) -> list[str]:
    return [c for p, block in runnable() if p == page for c, _ in block]


def test_the_readme_marks_what_it_does_not_run_and_runs_the_offline_workflows() -> None:
    readme = run_commands(README)
    assert readme[0] == "make demo"  # the Quickstart lists it first
    assert any(c.startswith("gate init ") for c in readme) and any(c.startswith("gate validate ") for c in readme)
    found = run_commands(COMMANDS)
    for words in ("--shard 1/2", "gate merge", "gate decide", "gate compare", "gate calibrate", "gate publish"):
        assert any(words in c for c in found), words
    skipped = [b for page in RUN for b in sh_blocks(page) if b.startswith(SKIP)]
    assert any("make test" in b for b in skipped) and any("OPENAI_API_KEY" in b for b in skipped)


def test_every_other_command_block_of_the_docs_says_why_it_is_not_run() -> None:
    """A page of docs/ other than COMMANDS.md is not run: each of its `sh` blocks says why, so a
    command added there is either moved where it runs or marked on purpose."""
    unmarked = [
        f"{page.relative_to(ROOT)}: {body.splitlines()[0]!r}"
        for page in sorted((ROOT / "docs").glob("*.md"))
        if page != COMMANDS
        for body in sh_blocks(page)
        if not (body.startswith(SKIP) and says_why(body))
    ]
    assert unmarked == []


def test_the_synopsis_lists_each_commands_flags() -> None:
    lang, synopsis = blocks(page_text(COMMANDS))[0]
    assert lang == "text"
    documented: dict[str, set[str]] = {}
    current = ""
    for line in synopsis.splitlines():
        words = line.split("#")[0].split()
        if words[:1] == ["gate"]:
            nested = words[1] == "review"  # `gate review ACTION`: each action is a command of its own
            current = " ".join(words[1:3] if nested else words[1:2])
            documented.setdefault(current, set())
        documented[current] |= {w.strip("[]|") for w in words if w.strip("[").startswith("--")}
    commands: dict[str, Any] = {}
    for name, parser in subcommands(build_parser()).items():
        actions = subcommands(parser)
        commands.update({f"{name} {a}": p for a, p in actions.items()} if actions else {name: parser})
    assert set(documented) == set(commands)
    for name, parser in commands.items():
        flags = {o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
        assert documented[name] == flags, name


def subcommands(parser: Any) -> dict[str, Any]:
    found = [a for a in parser._actions if isinstance(a.choices, dict) and not a.option_strings]
    return dict(found[0].choices) if found else {}


# Said on a terminal only (on stderr, or in place of the plain progress lines a pipe gets).
TERMINAL_ONLY = ("checking ", "loading the judge", "judging ", "judged ", "scheduling stopped")
# Whether in-flight judgments finish before a stop_when_decided lane stops depends on timing.
STOPPED = re.compile(
    r" \+ N not needed|Note: stopped after N of N judgments: no remaining outcome could change the verdict"
)


def captures(*pages: Path) -> dict[str, str]:
    """The terminal captures of the pages (`text` blocks opening with `$ command`): command -> screen."""
    found: dict[str, str] = {}
    for page in pages or RUN:
        for lang, body in blocks(page_text(page)):
            first, _, rest = body.partition("\n")
            if lang == "text" and first.startswith("$ "):
                found[first[2:].strip()] = rest
    return found


def screen_words(text: str) -> list[str]:
    """What a capture says, as words: wrapping, digits (tokens, timings, counts) and the lines a
    terminal alone shows left out, so the words, lines and their order are compared."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith(TERMINAL_ONLY)]
    said = re.sub(r"\d+", "N", " ".join(" ".join(lines).split()))
    return STOPPED.sub("", said).split()


def test_the_quickstart_captures_the_commands_it_runs() -> None:
    for page in RUN:
        assert set(captures(page)) <= set(run_commands(page)), page
    shown = "".join(page_text(page) for page in RUN)
    versions = set(re.findall(r"^Policy support-refunds version (\S+), lane", shown, re.M))
    example = (ROOT / "policies" / "example" / "policy.yaml").read_text()
    assert versions and all(f'policy_version: "{v}"' in example for v in versions), versions


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A scratch directory that looks like a checkout (the example policy copied; the Makefile,
    scripts, tests and .venv linked) and the environment a newcomer's shell has: the virtualenv on
    PATH, no key, no provider address, the offline provider on a free port."""
    venv = ROOT / ".venv"
    if not (venv / "bin" / "gate").exists():
        pytest.skip("no .venv with gate installed (`make test` makes one)")
    work = tmp_path / "checkout"
    work.mkdir()
    shutil.copytree(ROOT / "policies", work / "policies")
    for name in ("Makefile", "pyproject.toml", "requirements.lock", "requirements-dev.lock", "scripts", "tests"):
        (work / name).symlink_to(ROOT / name)
    warm_venv(venv, work / ".venv")
    env = {
        "PATH": f"{work / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(tmp_path),
        "GATE_DEMO_PORT": str(_free_port()),
        "RAGAS_DO_NOT_TRACK": "true",
        "COLUMNS": "100",
    }
    return work, env


def make_in_checkout(tmp_path: Path, target: str, timeout: int = 900) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`make TARGET` in a fresh checkout (the virtualenv taken as made), as a newcomer types it."""
    work, env = checkout(tmp_path)
    done = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", target],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    return work, done


LAUNCHED = ("python", "python3", "gate")


def warm_venv(venv: Path, into: Path) -> None:
    """`into`: the virtualenv `venv` linked entry by entry, but for its `python` and `gate`, which are
    tests/warm_launch.py: each command starts warm from the suite's process server, not from a fresh
    interpreter that imports ragas first (seconds of CPU a command)."""
    (into / "bin").mkdir(parents=True)
    for entry in venv.iterdir():
        if entry.name != "bin":
            (into / entry.name).symlink_to(entry)
    for entry in (venv / "bin").iterdir():
        if entry.name not in LAUNCHED:
            (into / "bin" / entry.name).symlink_to(entry)
    server = gate_process.server_address()
    for name in LAUNCHED:
        write_launcher(into / "bin" / name, "gate" if name == "gate" else "python", server)


def run_page(page: Path, tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """Run the page's offline blocks in a fresh checkout; assert each command's exit code.
    Returns the checkout and, for each command run, the stem of its out/err/code files."""
    work, env = checkout(tmp_path)
    port = env["GATE_DEMO_PORT"]
    ran: dict[str, Path] = {}  # a command run already -> the stem of its files
    for number, (_, block) in enumerate(b for b in runnable() if b[0] == page):
        # One shell a block, as a person types it (an `export` holds for the lines after it); each
        # command's output and exit code are kept apart. make must not reinstall the virtualenv it
        # is given (-o: take .venv/.installed as up to date); the offline provider's port is this test's.
        script = ["set +e"]
        stems: list[Path] = []
        for i, (command, _) in enumerate(block):
            if command in ran:  # a page never runs one command twice to show it prints something else
                stems.append(ran[command])
                continue
            stem = work / f"{number}.{i}"
            stems.append(stem)
            ran[command] = stem
            line = command.replace("127.0.0.1:8765", f"127.0.0.1:{port}")
            if line.startswith("make "):
                line = line.replace("make ", "make -s -o .venv/.installed ", 1)
            script.append(f"{line} >{stem}.out 2>{stem}.err </dev/null; echo $? >{stem}.code")
        subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env, timeout=900, check=False)
        for (command, expected), stem in zip(block, stems, strict=True):
            out, err = (Path(f"{stem}.{kind}").read_text() for kind in ("out", "err"))
            code = int(Path(f"{stem}.code").read_text())
            assert code == expected, (command, code, out[-3000:], err[-3000:])
            assert "Traceback" not in err, (command, err[-3000:])
            if command == "make demo":
                assert out.startswith("No key needed: judging policies/example/policy.yaml (lane pr)"), out[:300]
    # What the page shows a command printing, it prints (the captures drift as the program grows).
    for shown_command, shown in captures(page).items():
        printed = Path(f"{ran[shown_command]}.out").read_text().replace(f"127.0.0.1:{port}", "127.0.0.1:8765")
        assert screen_words(printed) == screen_words(shown), (shown_command, printed)
    return work, ran


# Three processes, one of which loads ragas: ~15 s on a quiet machine.
@pytest.mark.timeout(600)
def test_every_offline_command_of_the_readme_runs_as_written(tmp_path: Path) -> None:
    work, _ = run_page(README, tmp_path)
    assert "make demo" in captures(README)
    for path in ("gate-out/result.json", "suites/mine/policy.yaml"):
        assert (work / path).is_file(), path


# Eight processes that each start the gate (four of them load ragas): ~40 s on a quiet machine,
# far more on a loaded one, so this test gets more than the suite's 120 s.
@pytest.mark.timeout(600)
def test_every_offline_command_of_the_commands_page_runs_as_written(tmp_path: Path) -> None:
    work, _ = run_page(COMMANDS, tmp_path)
    assert any("--flip" in c for c in captures(COMMANDS))
    # What the commands were to write, they wrote.
    for path in ("gate-out-1/result.json", "gate-out/records.jsonl", "gate-compare/compare.md"):
        assert (work / path).is_file(), path
    assert (work / "gate-calibration" / "calibration.svg").is_file()


@pytest.mark.timeout(600)
def test_make_calibrate_offline_measures_the_judge_the_example_ships(tmp_path: Path) -> None:
    """`make calibrate-offline` ends as docs/CALIBRATION.md says: the calibration lane's run ends
    quality_failed (the scripted false pass, exit 1), and the measurement still follows, writing the
    calibration the example's release lane requires. If the figures changed with the example's
    judge or cases, run `make calibrate-offline` and commit policies/example/calibration/."""
    work, done = make_in_checkout(tmp_path, "calibrate-offline")
    assert "gate exited 1" in done.stdout + done.stderr
    measured = json.loads((work / "policies/example/calibration/calibration.json").read_text())
    shipped = json.loads((ROOT / "policies/example/calibration/calibration.json").read_text())
    assert measured["config_sha256"] == shipped["config_sha256"]  # the release lane's judge
    assert measured["overall"] == shipped["overall"]
    overall = measured["overall"]
    assert f"(kappa {overall['cohen_kappa']:.2f} on {overall['completed']} cases)" in page_text(CALIBRATION)
