#!/usr/bin/env bash
# The Dask scaling runs, on a 16-core machine, from the project's root (docs/distributed.md,
# docs/benchmarks.md). Where the machine lacks duckdb, sqlglot or Dask and reaches no package
# index, bring their wheels in .whl/ (they are installed into /tmp/site first). Tables go to
# $OUT (default /tmp/scaling). Each run has its own time limit; STEPS (below) picks the runs.
#
#   chains: a 1M-variable Ising grid's chains at 1, 8 and 14 workers, equal total updates (200
#           sweeps: the graph is shipped once per worker, so the run must be long enough for the
#           chains to dominate; target: >= 5x the one-process rate at 8 workers), then a check that
#           the pooled answer is the in-process one at 8 workers
#   tol:    the same grid's chains stopped by a tolerance (and a time limit) at 1, 8 and 14
#           workers: groups kept on the workers, run segment by segment with the stopping rule
#           evaluated on all chains between segments (segments, overhead, updates at the stop)
#   coref:  the dealt map/redistribute rounds and the sharded rounds (--sharded) at 100k and 1M
#           mentions (efficiency, worker memory, client MiB per round); 10M sharded (s10m) on its
#           own (worker memory target: <= 2 x (data / workers) + 200 MiB); the sharded rounds on
#           one component (l100k, l1m: --linked joins the name blocks, so the plan splits the
#           component over the shards and entities move across the cut pairs between rounds)
#
# `scaling.sh --dry-run` runs every step at a toy size on this machine's cores (2 workers), to check
# the script and the benchmarks before a device session; nothing it prints is a measurement.
set -u
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
OUT=${OUT:-/tmp/scaling}; mkdir -p "$OUT"
export PYTHONPATH=/tmp/site:$PWD NUMBA_CACHE_DIR=/tmp/nb PYTHONUNBUFFERED=1
{ nproc; python3 -c "import numba, numpy, duckdb, dask, pdbq; print(numba.__version__, numpy.__version__, duckdb.__version__, dask.__version__)"; } 2>&1 | tee "$OUT/env.txt"
# STEPS picks the runs (default: what fits one device session of about 8 minutes)
STEPS=${STEPS:-"chains check tol s1m l1m d1m"}
has() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
D=examples/bench/coref_distributed.py
C=examples/bench/chains_distributed.py
if [ "$DRY" = 1 ]; then
  set -e
  timeout 300 python3 $C --side 40 --sweeps 4 --workers 1 2 --threads 2>&1 | tee "$OUT/dry_chains.txt"
  timeout 300 python3 $C --side 40 --workers 2 --tolerance 0.05 --time-limit 20 --threads 2>&1 | tee "$OUT/dry_tol.txt"
  timeout 300 python3 $D --mentions 3000 --rounds 2 --sweeps 2 --workers 1 2 --skip-flat --threads 2>&1 | tee "$OUT/dry_d.txt"
  timeout 300 python3 $D --mentions 3000 --rounds 2 --sweeps 2 --workers 1 2 --skip-flat --threads --sharded 2>&1 | tee "$OUT/dry_s.txt"
  timeout 300 python3 $D --mentions 3000 --rounds 3 --sweeps 4 --workers 1 2 --skip-flat --threads --sharded --linked 2>&1 | tee "$OUT/dry_l.txt"
  grep -q "cut pairs" "$OUT/dry_l.txt"  # the component was split and the run says what crossed
  echo "dry run: every step ran"
  exit 0
fi
has chains && timeout "${TCH:-200}" python3 examples/bench/chains_distributed.py --side 1000 --sweeps 200 --workers 1 8 14 --no-check 2>&1 | tee "$OUT/chains1m.txt"
has check && timeout "${TCHK:-60}" python3 examples/bench/chains_distributed.py --side 300 --sweeps 40 --workers 8 2>&1 | tee "$OUT/chains_check.txt"
has tol && timeout "${TTOL:-150}" python3 $C --side 1000 --workers 1 8 14 --tolerance 0.01 --time-limit 40 --no-check 2>&1 | tee "$OUT/chains_tol.txt"
has d100k && timeout "${T100K:-120}" python3 $D --mentions 100000 --rounds 6 --sweeps 20 --workers 1 8 14 --skip-flat 2>&1 | tee "$OUT/d100k.txt"
has s100k && timeout "${TS100K:-90}" python3 $D --mentions 100000 --rounds 6 --sweeps 20 --workers 1 8 14 --skip-flat --sharded 2>&1 | tee "$OUT/s100k.txt"
has s1m && timeout "${TS1M:-150}" python3 $D --mentions 1000000 --rounds 4 --sweeps 10 --workers 1 8 14 --skip-flat --sharded 2>&1 | tee "$OUT/s1m.txt"
has l100k && timeout "${TL100K:-90}" python3 $D --mentions 100000 --rounds 6 --sweeps 20 --workers 1 8 14 --skip-flat --sharded --linked 2>&1 | tee "$OUT/l100k.txt"
has l1m && timeout "${TL1M:-150}" python3 $D --mentions 1000000 --rounds 4 --sweeps 10 --workers 1 8 14 --skip-flat --sharded --linked 2>&1 | tee "$OUT/l1m.txt"
has d1m && timeout "${T1M:-150}" python3 $D --mentions 1000000 --rounds 4 --sweeps 10 --workers 1 8 14 --skip-flat 2>&1 | tee "$OUT/d1m.txt"
has s10m && timeout "${TS10M:-600}" python3 $D --mentions 10000000 --rounds 4 --sweeps 4 --workers 14 --skip-flat --sharded 2>&1 | tee "$OUT/s10m.txt"
true
