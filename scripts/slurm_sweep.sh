#!/usr/bin/env bash
# Runs a meshsim sweep as a Slurm job array of shards and merges them.
#
#   scripts/slurm_sweep.sh SHARDS OUTDIR SWEEP-ARGS...
#   scripts/slurm_sweep.sh 8 runs/galaxy sweep all-gather --cluster galaxy_torus -b 1K -e 256M
#
# Task i runs `meshsim SWEEP-ARGS --shard i/SHARDS --resume OUTDIR/shard-i.jsonl` (so a task
# that is requeued or rerun by hand runs only its missing points); a last job, after every
# task succeeded, merges the shards into OUTDIR/sweep.txt, sweep.csv and sweep.svg. The script
# waits for the merge and prints the table. MESHSIM names the binary (default: meshsim on PATH,
# else target/release/meshsim); extra sbatch options go in SBATCH_OPTS.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,12p "$0" >&2; exit 2; }
shards=$1 out=$2
shift 2
meshsim=${MESHSIM:-$(command -v meshsim || echo "$(cd "$(dirname "$0")/.." && pwd)/target/release/meshsim")}
meshsim=$(realpath "$meshsim")
mkdir -p "$out"
out=$(realpath "$out")
args=$(printf '%q ' "$@")
# shellcheck disable=SC2086
array=$(sbatch --parsable ${SBATCH_OPTS:-} --array=0-$((shards - 1)) --cpus-per-task=1 \
  --job-name=meshsim-shard --output="$out/shard-%a.log" \
  --wrap "RAYON_NUM_THREADS=1 $meshsim $args --shard \$SLURM_ARRAY_TASK_ID/$shards --resume $out/shard-\$SLURM_ARRAY_TASK_ID.jsonl > /dev/null")
# shellcheck disable=SC2086
merge=$(sbatch --parsable ${SBATCH_OPTS:-} --dependency=afterok:"$array" --job-name=meshsim-merge \
  --output="$out/merge.log" \
  --wrap "cd $out && $meshsim merge shard-*.jsonl --plot sweep.svg > sweep.txt && $meshsim merge shard-*.jsonl --format csv > sweep.csv")
echo "shards: job $array (array 0-$((shards - 1))), merge: job $merge" >&2
while squeue -h -j "$array,$merge" 2>/dev/null | grep -q .; do sleep 2; done
state=$(sacct -n -X -j "$merge" -o State 2>/dev/null | head -1 | tr -d ' ' || true)
if [ ! -s "$out/sweep.txt" ]; then
  echo "slurm_sweep: the merge did not run (state ${state:-unknown}); see $out/*.log" >&2
  exit 1
fi
cat "$out/sweep.txt"
