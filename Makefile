# tkv-seam: the turbo-attn seam as a patch queue on a pinned vLLM release.
# `make help` lists the targets. Variables: BASE (default v0.31.0), TO (port target),
# FORCE=1 (override a refusal; may drop work), VLLM_GIT=<url-or-path> (git source),
# VERSION (make pin), SINCE= PRE=1 YANKED=1 REPORT=1 WRITE=1 (make watch), EXCLUDE_NEWER= EXCLUDE= WHY= (make lock-cpu).
# PATCH=<n|slug> (make bisect: one patch), TKV_SEAM_JOBS=<n> (test processes at once).
# FRESH=1 (make test and its lanes: run every lane, also those that passed before with the same
# inputs; .ci/run sets it), JSON=1 (a target that prints a result: exactly one JSON object on stdout).
# PROVE=0 (make carry: the gate alone, no patch's tests run), PROVE=1 (make port: run them).
# AUTORESOLVE=0 FIX=0 REPLAY=0 (make carry, make port VERB=start|continue|skip: what the port does by
# itself before it stops, off: docs/port.md "What the port does by itself").
# PROVE, FRESH, JSON, FORCE, AUTORESOLVE, FIX, REPLAY: 1/on/yes/true or 0/off/no/false, any case;
# anything else is exit 2.

# What a user gives is text, never make code: every variable set on the command line, and each
# variable below this Makefile reads from the environment, becomes its own value as written
# ($(value)), held as a simple variable (referencing it never expands what it holds again) and
# exported as it is (make would expand a command-line variable to export it). `$(shell …)`, `$$`,
# backticks and quotes in them reach the tool unchanged; nothing in them runs.
user_vars := BASE TO FORCE VLLM_GIT VERSION SINCE PRE YANKED REPORT WRITE EXCLUDE_NEWER EXCLUDE WHY PATCH PLUGIN \
             VERDICT REASON JSON DIFF PORT_TREE PROVE VERB SKIP CONTINUE STATUS ABORT FINISH TKV_SEAM_JOBS TRITON \
             PYTHON PIP_FIND_LINKS UV_CACHE_DIR BASE_IMAGE STAND_IN TURBO_ATTN PUSH REGISTRY REPOSITORY \
             IMAGE_TAG IMAGE_SOURCE INSTALLER DOCKER_HOST TKV_SEAM_CACHE TKV_SEAM_INDEX_URL \
             TKV_SEAM_LOCK_TIMEOUT HOME FRESH AUTORESOLVE FIX REPLAY
base_origin := $(origin BASE)
$(foreach v,$(sort $(user_vars) $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v)))),\
  $(if $(filter command line environment,$(origin $(v))),$(eval override $(v) := $$(value $(v)))$(eval export $(v))))
# BASE= (empty, on the command line or exported): as if no BASE was given
ifeq ($(strip $(value BASE)),)
base_origin := default
override BASE := v0.31.0
unexport BASE
endif
# PROVE, FRESH, JSON, FORCE, AUTORESOLVE, FIX, REPLAY: one spelling, 1/on/yes/true or 0/off/no/false in any
# case; each becomes 1 (on), 0 (off) or empty (not given: the target's default). Any other value
# stops make before any recipe runs (exit 2), with JSON=1 also as the one JSON object on stdout.
switch_vars := PROVE FRESH JSON FORCE AUTORESOLVE FIX REPLAY
lc = $(subst A,a,$(subst B,b,$(subst C,c,$(subst D,d,$(subst E,e,$(subst F,f,$(subst I,i,$(subst L,l,\
     $(subst N,n,$(subst O,o,$(subst R,r,$(subst S,s,$(subst T,t,$(subst U,u,$(subst Y,y,$(1))))))))))))))))
switch_of = $(if $(strip $(1)),$(if $(filter-out 1,$(words $(1))),bad,$(if $(filter 1 on yes true,$(call lc,$(strip \
            $(1)))),1,$(if $(filter 0 off no false,$(call lc,$(strip $(1)))),0,bad))),)
bad_switches := $(strip $(foreach v,$(switch_vars),$(if $(filter bad,$(call switch_of,$(value $(v)))),$(v))))
json_wanted := $(filter-out 0,$(call switch_of,$(value JSON)))
# $(call make_error,<text>,<hint>,<said on stderr>): stop before any recipe (exit 2), with JSON=1 the
# one JSON object too (<text> is the Makefile's own: no quote, no backslash; what a user typed is
# said on stderr only).
make_error = $(if $(json_wanted),$(info {"ok": false, "exit_code": 2, "error": "$(1)", "hint": "$(2)"}))$(error $(3))
switch_rule := is neither on nor off: give 1/on/yes/true or 0/off/no/false (any case)
ifneq ($(bad_switches),)
$(call make_error,$(firstword $(bad_switches)) $(switch_rule),make help,$(firstword $(bad_switches))='$(value $(firstword $(bad_switches)))' $(switch_rule))
endif
$(foreach v,$(switch_vars),$(eval override $(v) := $(call switch_of,$(value $(v)))))
override JSON := $(filter 1,$(JSON))
# A path pasted into a recipe line, quoted for the shell when it holds more than a plain path:
# $(call sh,$(VENV)).
shell_meta := ' " ` $$ ; & | < > ( ) \ * ? [ ] ~ ! { } ^ \#
sh = $(if $(strip $(foreach c,$(shell_meta),$(findstring $(c),$(1)))$(filter-out 1,$(words $(1)))),'$(subst ','\'',$(1))',$(1))

BASE    ?= v0.31.0
# BASE names files and targets (build/vllm-BASE, .venv-vllm-BASE, ci/lock-cpu-BASE.txt) and goes on
# recipe lines: a base name only (letters, digits, . _ + -), else make stops before any recipe runs.
name_chars := a b c d e f g h i j k l m n o p q r s t u v w x y z A B C D E F G H I J K L M N O P Q R S \
              T U V W X Y Z 0 1 2 3 4 5 6 7 8 9 . _ + -
base_rest := $(BASE)
$(foreach c,$(name_chars),$(eval base_rest := $$(subst $(c),,$$(base_rest))))
ifneq ($(base_rest)$(filter-out 0 1,$(words $(BASE)))$(filter -%,$(firstword $(BASE))),)
base_rule := is not a base name (letters and digits and . _ + -; e.g. BASE=v0.32.0; .venv/bin/tkv-seam bases lists them)
$(call make_error,BASE $(base_rule),.venv/bin/tkv-seam bases,BASE='$(BASE)' $(base_rule))
endif
# `make test` checks every carried base (each base of bases.toml whose queue exists: `tkv-seam
# carried`, release order), each with its own queue, tree, venv and lanes. `make test BASE=v0.32.0`
# (BASE on the command line or in the environment) checks that one base only.
ONE_BASE := $(if $(filter command line environment,$(base_origin)),$(BASE),)
# Under make bisect (also with -j) PATCH is checked before the tree and the venv are made.
bisect_first := $(if $(filter bisect,$(MAKECMDGOALS)),bisect-patch)
PYTHON  ?= python3.11
TREE    := build/vllm-$(BASE)
VENV    := .venv
LOCK    := ci/lock-cpu-$(BASE).txt
UV      := $(VENV)/bin/uv
TOOL    := $(VENV)/bin/tkv-seam
FORCE_FLAG := $(if $(filter 1,$(FORCE)),--force,)
export UV_CACHE_DIR ?= $(HOME)/.cache/uv
# the command being run, for a hint that repeats it with what was meant (a mistyped BASE)
export TKV_SEAM_MAKE_GOAL := $(firstword $(MAKECMDGOALS))

.DEFAULT_GOAL := help

# JSON=1: stdout holds the one JSON object of the target's own command. make echoes no recipe
# line (nor a sub-make's "Entering directory"; `make -C <dir>` prints its own before it reads this
# file: give it -s too), what a prerequisite prints (apply's summary, a venv's install) goes to
# stderr ($(to_err) on those recipes), and a prerequisite that fails prints the object instead.
ifneq ($(value JSON),)
.SILENT:
MAKEFLAGS += --no-print-directory

to_err := >&2
say := :
usage_json = printf '%s\n' '{"ok": false, "exit_code": 2, "error": "$(1)", "hint": "make help"}';
# a prerequisite's command that fails: the target's one JSON object, naming it
failed_json = || { rc=$$?; printf '%s\n' '{"ok": false, "exit_code": '$$rc', "error": "$(1) failed", "hint": "$(2)"}'; exit $$rc; }
# a prerequisite's tool command: its own JSON object, on stdout only when it fails
tool_json = if out=$$($(1) --json); then printf '%s\n' "$(2): ok" >&2; else rc=$$?; \
  [ -n "$$out" ] || out='{"ok": false, "exit_code": '$$rc', "error": "$(2) failed", "hint": "$(2)"}'; \
  printf '%s\n' "$$out"; exit $$rc; fi
endif
# the tool's command line a recipe runs, said on stderr (never with JSON=1: stdout holds the one object)
say ?= echo
# $(call usage,<text>): a recipe's usage error on stderr and, with JSON=1, as the one JSON object
# on stdout (the tool's error shape); <text> is the Makefile's own (no quote, no backslash).
usage = { echo "$(1)" >&2; $(call usage_json,$(1)) exit 2; }

# The lanes make runs itself (tooling, series, image) run through `tkv-seam seamtest lane`: skipped
# when they passed before with the same inputs (build/passes/; FRESH=1 runs them). A key holds every
# project file but docs/, README.md, LICENSE and .github/ (docs/tests.md), which only the tooling
# lane's tests read: it names them. The seam lanes (`seamtest all`) key their own jobs.
lane = $(call sh,$(TOOL)) seamtest lane
tooling_reads := docs README.md LICENSE .github
.PHONY: check-refresh help apply refresh lint lint-queue lint-code lint-patches test test-base test-tooling test-series test-image test-seam bisect bisect-patch \
        seam-full seam-full-cuda upstream plugin differential bench times image standin port drift overlay overlay-restore venv venv-vllm clean \
        pin watch lint-workflows lock-cpu seam-table retire carry

# Each target's help: `## <what it does> | <the variables it takes>` (the variables on a line of their own).
help: ## Show this help
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{ n = split($$2, part, " [|] "); \
	  printf "  make %-15s %s\n", $$1, part[1]; if (n > 1) printf "  %-20s %s\n", "", part[2] }'
	@echo "Any target: TKV_SEAM_CACHE=<dir> TKV_SEAM_INDEX_URL=<url> TKV_SEAM_LOCK_TIMEOUT=<s> (also from the environment)"

$(VENV)/.done: pyproject.toml
	$(call sh,$(PYTHON)) -m venv $(call sh,$(VENV)) $(to_err) $(call failed_json,the tool venv (python -m venv),make venv)
	$(call sh,$(VENV))/bin/python -m pip install -q --disable-pip-version-check uv==0.13.9 $(to_err) $(call failed_json,the tool venv (pip install uv),make venv)
	$(call sh,$(UV)) pip install -q -p $(call sh,$(VENV))/bin/python -e '.[test]' $(to_err) $(call failed_json,the tool venv (uv pip install),make venv)
	touch $(call sh,$@)

venv: $(VENV)/.done ## Tool venv (.venv): click, unidiff, docker, pytest, ruff | PYTHON=python3.11

# The test venv is the tool's: it builds .venv-vllm-BASE from the lock and the base's rules in
# bases.toml (the Triton stand-in where they say so), and keeps it when nothing it is built from changed.
venv-vllm: export TKV_VENV_TRITON := $(value TRITON)
venv-vllm: venv $(LOCK) $(bisect_first) ## Test venv of BASE (.venv-vllm-BASE): that vLLM release + CPU torch from ci/lock-cpu-BASE.txt, and the base's rules (TRITON=stand-in: record that rule first) | BASE=<base> PYTHON=python3.11 PIP_FIND_LINKS=<dir> TRITON=<stand-in|none>
	@set -- venv-vllm $(BASE) --python $(call sh,$(PYTHON)); \
	if [ -n "$$TKV_VENV_TRITON" ]; then set -- "$$@" --triton "$$TKV_VENV_TRITON"; fi; \
	exec $(call sh,$(TOOL)) "$$@" $(to_err)

# A base without its lock yet: say which command makes it (instead of make's "No rule to make target").
ci/lock-cpu-%.txt: | venv
	@$(call sh,$(TOOL)) bases $(call sh,$*) >/dev/null || exit 2; \
	echo "make: no $@: make lock-cpu BASE=$*   (resolves vLLM $* with this machine's CPU torch)" >&2; exit 2

# The values a user gives (EXCLUDE_NEWER, PLUGIN; VERSION of pin, SINCE of watch, PATCH of bisect)
# reach the tool through the environment, taken with $(value), as for carry and port: make expands
# nothing in them and the shell runs nothing in them (a marker's quotes, a space, backticks stay as written).
lock-cpu: export TKV_LOCK_EXCLUDE_NEWER := $(value EXCLUDE_NEWER)
lock-cpu: export TKV_LOCK_EXCLUDE := $(value EXCLUDE)
lock-cpu: export TKV_LOCK_WHY := $(value WHY)
lock-cpu: venv ## Resolve BASE's CPU lock ci/lock-cpu-BASE.txt with uv, the machine's CPU torch and the base's rules (bases.toml) | BASE=<base> EXCLUDE_NEWER=<time> (the same pins again) EXCLUDE='<package> ...' WHY='<reason>' (left out, recorded in bases.toml)
	@set -- lock-cpu $(BASE); \
	if [ -n "$$TKV_LOCK_EXCLUDE_NEWER" ]; then set -- "$$@" --exclude-newer "$$TKV_LOCK_EXCLUDE_NEWER"; fi; \
	set -f; for p in $$TKV_LOCK_EXCLUDE; do set -- "$$@" --exclude "$$p"; done; set +f; \
	if [ -n "$$TKV_LOCK_WHY" ]; then set -- "$$@" --why "$$TKV_LOCK_WHY"; fi; \
	$(say) $(call sh,$(TOOL)) "$$*" >&2; \
	exec $(call sh,$(TOOL)) "$$@"

seam-table: export TKV_SEAMTABLE_PLUGIN := $(value PLUGIN)
seam-table: venv ## Write BASE's ["BASE".seam] table from its sdist and the base it is carried from | BASE=<base> PLUGIN='turbo-attn==<v>' FORCE=1
	@set -- seam-table $(BASE); \
	if [ -n "$$TKV_SEAMTABLE_PLUGIN" ]; then set -- "$$@" --plugin "$$TKV_SEAMTABLE_PLUGIN"; fi; \
	$(say) $(call sh,$(TOOL)) "$$* $(FORCE_FLAG)" >&2; \
	exec $(call sh,$(TOOL)) "$$@" $(FORCE_FLAG)

# What the port does by itself, turned off (docs/port.md): AUTORESOLVE=0 (offset, imports, replay), FIX=0, REPLAY=0.
AUTO_FLAGS = $(if $(filter 0,$(AUTORESOLVE)),--no-autoresolve) $(if $(filter 0,$(FIX)),--no-fix) \
             $(if $(filter 0,$(REPLAY)),--no-replay)
# make carry VERSION=0.34.0 [PLUGIN='turbo-attn==X'] [VERDICT=...] [REASON='...']: what a user gives reaches
# the tool through the environment, taken with $(value), as for make port (nothing in it is re-read as shell).
carry: export TKV_CARRY_VERSION := $(value VERSION)
carry: export TKV_CARRY_PLUGIN := $(value PLUGIN)
carry: export TKV_CARRY_VERDICT := $(value VERDICT)
carry: export TKV_CARRY_REASON := $(value REASON)
carry: venv ## Carry a vLLM release: pin, .seam table, CPU lock, port (run again after each stop) | VERSION=0.34.0 PLUGIN='turbo-attn==<v>' VERDICT=<verdict> REASON='<why>' PROVE=0 AUTORESOLVE=0 FIX=0 REPLAY=0 JSON=1
	@if [ -z "$$TKV_CARRY_VERSION" ]; then $(call usage,usage: make carry VERSION=0.34.0); fi; \
	set -- carry "$$TKV_CARRY_VERSION"; \
	if [ -n "$$TKV_CARRY_PLUGIN" ]; then set -- "$$@" --plugin "$$TKV_CARRY_PLUGIN"; fi; \
	if [ -n "$$TKV_CARRY_VERDICT" ]; then set -- "$$@" --verdict "$$TKV_CARRY_VERDICT"; fi; \
	if [ -n "$$TKV_CARRY_REASON" ]; then set -- "$$@" --reason "$$TKV_CARRY_REASON"; fi; \
	$(if $(filter 0,$(PROVE)),set -- "$$@" --no-prove;) \
	$(if $(AUTO_FLAGS),set -- "$$@" $(AUTO_FLAGS);) \
	set -- "$$@" $(if $(value JSON),--json,); \
	$(say) $(call sh,$(TOOL)) "$$*" >&2; \
	exec $(call sh,$(TOOL)) "$$@"

retire: venv ## Retire BASE: queue, pin, lock, trees (a copy kept under build/dropped/; not v0.31.0) | BASE=<base> FORCE=1
	@test -n "$(ONE_BASE)" || { echo "usage: make retire BASE=v0.32.0" >&2; exit 2; }
	$(call sh,$(TOOL)) retire $(BASE) $(FORCE_FLAG)

apply: venv $(bisect_first) ## Fetch + verify BASE, apply BASE's own queue strictly into build/vllm-BASE | BASE=<base> FORCE=1 VLLM_GIT=<url-or-path>
	$(if $(value JSON),$(call tool_json,$(call sh,$(TOOL)) apply --base $(BASE) $(FORCE_FLAG),make apply BASE=$(BASE)),\
	  $(call sh,$(TOOL)) apply --base $(BASE) $(FORCE_FLAG))

refresh: venv ## Export build/vllm-BASE's commits back to BASE's own queue (bases.toml), only that one | BASE=<base> FORCE=1
	$(call sh,$(TOOL)) refresh --base $(BASE) $(FORCE_FLAG)

lint: venv lint-queue lint-code lint-workflows ## Lint a queue (BASE's: first, so a mistyped BASE stops at once) and its patched files (vLLM's ruff gate), the tool's code, the GitHub workflows (schema) | BASE=<base>

lint-queue: venv ## BASE's queue (headers, paths, series) and its patched files (the base's ruff gate) | BASE=<base>
	$(call sh,$(TOOL)) lint --base $(BASE)
	$(MAKE) --no-print-directory lint-patches

lint-code: venv ## The tool's own ruff check and ruff format --check (scripts, tests, bench)
	$(call sh,$(VENV))/bin/ruff check scripts tests bench
	$(call sh,$(VENV))/bin/ruff format --check scripts tests bench

# check-jsonschema carries GitHub's workflow schema: validated offline, the workflow is not run here.
lint-workflows: venv ## The GitHub workflows against GitHub's workflow schema (offline)
	$(call sh,$(VENV))/bin/check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml

lint-patches: apply ## The base's style gate (its ruff pin in bases.toml, the tree's pyproject) on every patched .py file | BASE=<base>
	$(call sh,$(TOOL)) stylecheck --base $(BASE)

test: venv lint-code lint-workflows test-tooling ## Everything: lint, tool tests, then per carried base (tkv-seam carried, or BASE=) queue lint, seam tests on CPU, image; a lane that passed with the same inputs says "cached pass" | BASE=<base> TKV_SEAM_JOBS=<n> FRESH=1
	@bases="$(ONE_BASE)"; [ -n "$$bases" ] || bases=$$($(call sh,$(TOOL)) -q carried) || exit 1; bases=$$(echo $$bases); \
	[ -n "$$bases" ] || { echo "make test: no carried base (tkv-seam carried)" >&2; exit 1; }; \
	failed=; for b in $$bases; do \
	  echo "== make test-base BASE=$$b"; \
	  $(MAKE) --no-print-directory test-base BASE=$$b || failed="$$failed $$b"; \
	done; \
	if [ -n "$$failed" ]; then echo "make test: failed on:$$failed" >&2; exit 1; fi; \
	echo "make test: passed on $$bases"

test-base: lint-queue check-refresh test-series test-seam test-image ## One base's checks (BASE): queue lint, refresh round trip, series, seam lanes, image | BASE=<base> TKV_SEAM_JOBS=<n>

test-tooling: venv ## The queue's own tests (synthetic bases, offline; on every core); skipped when they passed with the same inputs | FRESH=1 TKV_SEAM_JOBS=<n>
	$(lane) tooling $(foreach r,$(tooling_reads),--reads $(r)) -- $(call sh,$(VENV))/bin/python tests/tooling/run_all.py

test-series: apply ## The real series: footprint, forbidden names, quilt push -a, git am | BASE=<base> FRESH=1
	$(lane) series --base $(BASE) -- \
	  env BASE=$(BASE) $(call sh,$(VENV))/bin/python -m pytest -q tests/series

test-image: apply ## The overlay image on stand-in bases, a push to a local registry (needs dockerd, docker-registry; CI has both) | BASE=<base> DOCKER_HOST=<socket> FRESH=1
	$(lane) image --base $(BASE) --plugin --env DOCKER_HOST --env TKV_SEAM_REQUIRE_DOCKER \
	  -- env BASE=$(BASE) $(call sh,$(VENV))/bin/python -m pytest -q -rs tests/image

test-seam: apply venv-vllm ## Bisect, full series (CPU and CUDA-alike), upstream no-regression, plugin, differential (one schedule, both cores; jobs that passed with the same inputs skipped) | BASE=<base> TKV_SEAM_JOBS=<n> FRESH=1
	$(call sh,$(TOOL)) seamtest all --base $(BASE)

bisect: export TKV_BISECT_PATCH := $(value PATCH)
bisect: bisect-patch apply venv-vllm ## Each patch's tests pass at k and fail at k-1; every prefix compiles and passes the style gate (PATCH=0009: that patch only) | BASE=<base> PATCH=<n|slug> TKV_SEAM_JOBS=<n>
	@set -- seamtest bisect --base $(BASE); \
	if [ -n "$$TKV_BISECT_PATCH" ]; then set -- "$$@" --patch "$$TKV_BISECT_PATCH"; fi; \
	$(say) $(call sh,$(TOOL)) "$$*" >&2; \
	exec $(call sh,$(TOOL)) "$$@"

# PATCH checked against BASE's series before the tree and the venv are made (a typo costs nothing).
bisect-patch: export TKV_BISECT_PATCH := $(value PATCH)
bisect-patch: venv ## Check PATCH against BASE's series, no tree or venv made (bisect does it first) | BASE=<base> PATCH=<n|slug>
	@if [ -n "$$TKV_BISECT_PATCH" ]; then \
	  exec $(call sh,$(TOOL)) seamtest bisect --base $(BASE) --patch "$$TKV_BISECT_PATCH" --check-only; \
	elif [ -n "$(filter bisect-patch,$(MAKECMDGOALS))" ]; then \
	  echo "make bisect-patch: PATCH=<n|slug> is needed" >&2; exit 2; fi

seam-full: apply venv-vllm ## All seam tests on the full series | BASE=<base> TKV_SEAM_JOBS=<n>
	$(call sh,$(TOOL)) seamtest full --base $(BASE)

seam-full-cuda: apply venv-vllm ## All seam tests, platform reporting is_cuda_alike() (CUDA-only branches) | BASE=<base> TKV_SEAM_JOBS=<n>
	$(call sh,$(TOOL)) seamtest full --cuda-alike --base $(BASE)

upstream: apply venv-vllm ## vLLM's own tests: no failure that stock BASE does not show | BASE=<base> TKV_SEAM_JOBS=<n>
	$(call sh,$(TOOL)) seamtest upstream --base $(BASE)

plugin: apply venv-vllm ## The base's turbo-attn pin loads on the patched vLLM (and breaks stock) | BASE=<base> TKV_SEAM_JOBS=<n>
	$(call sh,$(TOOL)) seamtest plugin --base $(BASE)

differential: apply venv-vllm ## Patched vs pristine BASE planner on random unfused plans (tests/differential) | BASE=<base> TKV_SEAM_JOBS=<n>
	$(call sh,$(TOOL)) seamtest differential --base $(BASE)

overlay: apply venv-vllm ## Install the full series' overlay into .venv-vllm-BASE | BASE=<base>
	$(call sh,$(TOOL)) overlay install --base $(BASE)

overlay-restore: apply venv-vllm ## Put the pristine BASE files back into .venv-vllm-BASE | BASE=<base>
	$(call sh,$(TOOL)) overlay restore --base $(BASE)

times: venv ## The lanes' timing record (build/passes/): each lane step's last measured run, with load, cores, date | JSON=1
	$(call sh,$(TOOL)) seamtest times $(if $(value JSON),--json,)

bench: apply venv-vllm ## Speed: apply cold/warm, bytes fetched; patched vs stock ratios | BASE=<base>
	$(call sh,$(VENV))/bin/python bench/bench.py --base $(BASE)

# The image's variables reach the tool through the environment (never through a shell string):
# BASE_IMAGE, STAND_IN=1, TURBO_ATTN (empty: no plugin), PUSH=1, REGISTRY, REPOSITORY, IMAGE_TAG,
# IMAGE_SOURCE; make standin: INSTALLER=none.
image: apply ## Build the overlay image (TURBO_ATTN= empty: no plugin) | BASE=<base> BASE_IMAGE=<image> STAND_IN=1 TURBO_ATTN='<req --hash=sha256:…>' PUSH=1 REGISTRY=<host[:port]> REPOSITORY=<path> IMAGE_TAG=<ref> IMAGE_SOURCE=<url> JSON=1 DOCKER_HOST=<socket>
	$(call sh,$(TOOL)) image --base $(BASE) $(if $(value JSON),--json,)

standin: apply ## Import a local stand-in of BASE's official image (no registry needed; INSTALLER=none: no uv) | BASE=<base> INSTALLER=none JSON=1 DOCKER_HOST=<socket>
	$(call sh,$(TOOL)) standin --base $(BASE) $(if $(value JSON),--json,)

# make port VERB=<verb> TO=<base> [BASE=<base>] [REASON='...'] [VERDICT=...] [PORT_TREE=<dir>] [JSON=1] [FORCE=1]
# One verb per run (docs/port.md, "The port verbs"). The text a user gives (VERB, TO, BASE, REASON,
# VERDICT, PORT_TREE) reaches the tool through the environment, taken with $(value): make expands
# nothing in it and the shell runs nothing in it ("$$VAR" is never re-read as shell).
PORT_VERBS := report start continue skip abort status finish
unexport VERB TO REASON VERDICT PORT_TREE SKIP
port: export TKV_PORT_VERB := $(value VERB)
port: export TKV_PORT_TO := $(value TO)
port: export TKV_PORT_BASE := $(ONE_BASE)
port: export TKV_PORT_REASON := $(value REASON)
port: export TKV_PORT_VERDICT := $(value VERDICT)
port: export TKV_PORT_TREE := $(value PORT_TREE)
port: export TKV_PORT_OLD := $(strip $(foreach v,REPORT CONTINUE SKIP STATUS ABORT FINISH,$(if $(value $(v)),$(v)=)))
port: venv ## Forward-port onto TO, one VERB: report, start, continue, skip, abort, status, finish | VERB=<verb> TO=<base> BASE=<base> (default: the newest carried base older than TO) REASON='<why>' VERDICT=<verdict> PORT_TREE=<dir> PROVE=1 AUTORESOLVE=0 FIX=0 REPLAY=0 JSON=1 FORCE=1
	@if [ -n "$$TKV_PORT_OLD" ]; then echo "make port: $$TKV_PORT_OLD is gone" >&2; \
	  $(call usage,make port: one verb per run: make port VERB=<$(PORT_VERBS)> TO=<base>); fi; \
	case " $(PORT_VERBS) " in *" $$TKV_PORT_VERB "*) ;; *) case "$$TKV_PORT_VERB" in ""|*[!a-zA-Z_-]*) \
	  echo "make port: got VERB='$$TKV_PORT_VERB'" >&2; \
	  $(call usage,usage: make port VERB=<$(PORT_VERBS)> TO=<base> [REASON=<why>] [VERDICT=<verdict>]   (where ports stand: make port VERB=status));; esac; \
	  exec $(call sh,$(TOOL)) port "$$TKV_PORT_VERB" $${TKV_PORT_TO:+--to "$$TKV_PORT_TO"} $(if $(value JSON),--json,);; esac; \
	if [ -z "$$TKV_PORT_TO" ] && [ "$$TKV_PORT_VERB" != status ]; then $(call usage,usage: make port VERB=<verb> TO=<base>   (VERB=status alone: every port in progress)); fi; \
	set -- port "$$TKV_PORT_VERB" $${TKV_PORT_TO:+--to "$$TKV_PORT_TO"}; \
	case "$$TKV_PORT_VERB" in report|start) [ -z "$$TKV_PORT_BASE" ] || set -- "$$@" --base "$$TKV_PORT_BASE";; esac; \
	if [ -n "$$TKV_PORT_TREE" ]; then set -- "$$@" --tree "$$TKV_PORT_TREE"; fi; \
	if [ -n "$$TKV_PORT_REASON" ]; then set -- "$$@" --reason "$$TKV_PORT_REASON"; fi; \
	if [ -n "$$TKV_PORT_VERDICT" ]; then set -- "$$@" --verdict "$$TKV_PORT_VERDICT"; fi; \
	$(if $(filter 1,$(PROVE)),case "$$TKV_PORT_VERB" in (start|continue|skip) set -- "$$@" --prove;; esac;) \
	$(if $(AUTO_FLAGS),case "$$TKV_PORT_VERB" in (start|continue|skip) set -- "$$@" $(AUTO_FLAGS);; esac;) \
	set -- "$$@" $(if $(value JSON),--json,) $(FORCE_FLAG); \
	$(say) $(call sh,$(TOOL)) "$$*" >&2; \
	exec $(call sh,$(TOOL)) "$$@"

# DIFF and BASE reach `drift --diff` through the environment; without BASE= every pair of bases.
drift: venv ## Per patch, each base against the previous one (the matrix); DIFF=<slug> [BASE=]: that patch's range-diff | DIFF=<slug> BASE=<base> JSON=1
	@$(say) $(call sh,$(TOOL)) "drift$${DIFF:+ --diff '$$DIFF'}$${DIFF:+$${BASE:+ --base '$$BASE'}}$(if $(value JSON), --json,)" >&2; \
	exec $(call sh,$(TOOL)) drift $(if $(value JSON),--json,)

pin: export TKV_PIN_VERSION := $(value VERSION)
pin: venv ## Pin a vLLM release in bases.toml from its verified sdist (make pin VERSION=0.34.0) | VERSION=<version>
	@if [ -z "$$TKV_PIN_VERSION" ]; then echo "usage: make pin VERSION=0.34.0" >&2; exit 2; fi; \
	$(say) $(call sh,$(TOOL)) "pin $$TKV_PIN_VERSION" >&2; \
	exec $(call sh,$(TOOL)) pin "$$TKV_PIN_VERSION"

# make can only exit 2 on a failed recipe: the tool's exit 11 (a newer release exists, not a
# failure) becomes 0 here; call `tkv-seam watch` directly to branch on it.
WATCH_ARGS = $(if $(value PRE),--pre,) $(if $(value YANKED),--yanked,) $(if $(value REPORT),--report,) \
             $(if $(value WRITE),--write,)
watch: export TKV_WATCH_SINCE := $(value SINCE)
watch: venv ## vLLM releases newer than the carried base; REPORT=1 writes build/drift/ | SINCE=<base-or-version> PRE=1 YANKED=1 REPORT=1 WRITE=1
	@set -- watch; \
	if [ -n "$$TKV_WATCH_SINCE" ]; then set -- "$$@" --since "$$TKV_WATCH_SINCE"; fi; \
	set -- "$$@" $(strip $(WATCH_ARGS)); \
	echo $(call sh,$(TOOL)) "$$*"; \
	rc=0; $(call sh,$(TOOL)) "$$@" || rc=$$?; \
	if [ $$rc -eq 11 ]; then echo "make watch: newer release(s) above (tkv-seam exit 11)"; rc=0; fi; exit $$rc

# clean is the tool's (tkv-seam clean): it removes only what it made and refuses trees holding work
# (a stopped port, commits not refreshed, files git ignores), naming the command that keeps them.
clean: ## Remove what the tool made under build/ but build/dropped/; refuses work (FORCE=1: kept in build/dropped/ first) | FORCE=1
	@if [ -e build ] || [ -L build ]; then \
	  $(MAKE) -s --no-print-directory $(call sh,$(VENV)/.done) && $(call sh,$(TOOL)) clean $(FORCE_FLAG); fi

# It compares with the project's HEAD: a queue edited and refreshed but not committed is said so first.
check-refresh: apply ## apply then refresh changes no byte of patches/ or series as committed (commit them first) | BASE=<base>
	@if [ -n "$$(git status --porcelain -- patches series)" ]; then git status --short -- patches series >&2; \
	  echo "make check-refresh: patches/ or series differ from the project's HEAD (above); it checks the committed queue" >&2; \
	  echo "  next: git add series patches && git commit -m '<slug>: <what changed>'   (then make check-refresh BASE=$(BASE))" >&2; \
	  exit 1; fi
	$(call sh,$(TOOL)) refresh --base $(BASE)
	@git diff --exit-code -- patches series || { \
	  echo "make check-refresh: apply + refresh changed the committed queue (the diff above): not byte-stable" >&2; \
	  echo "  next: git add series patches && git commit -m 'refresh: the canonical form'   (then make check-refresh BASE=$(BASE))" >&2; \
	  exit 1; }
