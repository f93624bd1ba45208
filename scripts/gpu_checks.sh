#!/usr/bin/env bash
# The GPU checks in one pass, each part under its own time limit so that one slow part cannot take the others with it:
#   OUT=DIR DATA_ARCHIVE=DIR WHEELS=DIR [PARTS="pytest bench dbm dbn raise"] [PYTEST_SECONDS=170] [DBM_SECONDS=110] [DBN_SECONDS=110] bash scripts/gpu_checks.sh [budget s, default 540]
# Parts, in this order, each skipped unless named in PARTS (default: pytest bench dbm raise):
# pytest: `pytest -m cuda` (the oracle table on CUDA, CPU–CUDA agreement, host-sync-free training steps, CUDA graphs
#         replaying the eager numbers), whole log kept;
# bench:  scripts/benchmark.py --device cuda at the full sizes, case by case (merged into one JSON; rbm_ais_graphs and
#         dbm_ais_graphs: AIS with CUDA graphs against without, at 1,000 and 10,000 chains);
# dbn:    the zoo DBN recipe DBN_RECIPE (default zoo_dbn_500_2000_fresh_chains1000: the top RBM by PCD-1 (1,000 chains, 250 epochs) at lr 1e-4 on fresh posterior samples, from the zoo's CD25(500) turned upside down) resumed on CUDA from
#         zoo/training/DBN_STATE, or started there when no state is committed (the default dbn-binarized_mnist's state left with
#         its model, the zoo's DBN since 2026-11-30: the part now reruns that recipe from its start), for DBN_SECONDS;
# dbm:    the zoo DBM recipe DBM_RECIPE (default zoo_dbm_500_1000_from_rbm_sampled_momentum05_averaged, the zoo's
#         dbm-binarized_mnist since 2026-12-02: its run is over, so the part reruns the recipe from its start and times an
#         accelerator's epochs) resumed on CUDA from zoo/training/DBM_STATE (default dbm-binarized_mnist), or started there
#         when no state is committed, for DBM_SECONDS (3–8 min an epoch on one EPYC core; DBM_SECONDS=rest: until 15 s
#         before the budget ends); a second call on the still-warm machine goes on from its own /tmp/dbm-run; then the
#         depth diagnostic of the run's checkpoint (scripts/dbm_depth.py, AIS K = 10⁴ on 1,000 random test digits, CUDA)
#         into dbm_depth.json;
# raise:  scripts/reproduce_raise.py with RAISE_ARGS (default: --paper-scale --from-zoo models on three models) on CUDA,
#         for as much of the time left as RAISE_SECONDS allows (default: all of it); RAISE_ARGS="... --compile" runs the
#         table's steps compiled (hashed draws, fused kernels: untried on a GPU so far, so not the default), and
#         RAISE_ARGS="... --cuda-graphs" replays them from CUDA graphs (the same numbers: use it once pytest's
#         test_cuda_graphs passes there).
# A 15-minute lease leaves about 9 minutes of commands: e.g. PARTS="pytest dbm" DBM_SECONDS=400 to push the DBM on.
# Everything it writes lands in $OUT (logs, JSON, tars of the advanced DBM and DBN runs: copy their contents back into
# zoo/training/<name>/ and commit). WHEELS (optional) holds wheels of
# packages the machine lacks (hydra-core, omegaconf, antlr4); DATA_ARCHIVE (optional) holds binarized_mnist/*.amat.gz.
set -u
budget=${1:-540}
out=${OUT:?set OUT to the folder for results}
start=$SECONDS
left() { echo $((budget - (SECONDS - start))); }
log() { echo "[$(date +%T) +$((SECONDS - start))s] $*" | tee -a "$out/log.txt"; }
export PYTHONUNBUFFERED=1 PFZOO_DATA=${PFZOO_DATA:-/tmp/pfzoo-data}

if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ -n "${DATA_ARCHIVE:-}" ]; then
  mkdir -p "$PFZOO_DATA/binarized_mnist"
  for f in "$DATA_ARCHIVE"/binarized_mnist/*.amat.gz; do gunzip -c "$f" > "$PFZOO_DATA/binarized_mnist/$(basename "${f%.gz}")"; done
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$out/log.txt"
python3 -c "import torch, hydra; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())" 2>&1 | tee -a "$out/log.txt"

parts=${PARTS:-pytest bench dbm raise}
wants() { [[ " $parts " == *" $1 "* ]]; }

if wants pytest; then
log "pytest -m cuda"
timeout "${PYTEST_SECONDS:-170}" python3 -m pytest -m cuda -q -n 8 -p no:cacheprovider tests > "$out/pytest_cuda.log" 2>&1
log "pytest: $(tail -n 1 "$out/pytest_cuda.log")"
fi

if wants bench; then
log "benchmark --device cuda"
bench_end=$((SECONDS + 190))
for case in poe_hais rbm_naive_mcmc rbm_ais dbm_ais rbm_ais_graphs dbm_ais_graphs rbm_raise rbm_ais_small rbm_pcd rbm_mpf ising_gibbs ising_mpf generative_hais rbm_pt rbm_fpcd rbm_naive_mcmc rbm_nce \
            rbm_self_contrastive rbm_ratio_matching rbm_stochastic_ratio_matching rbm_generalized_score_matching rbm_generalized_pseudolikelihood rbm_ais_compiled dbm_ais_compiled poe_hais_compiled rbm_raise_compiled poe_nce; do
  remaining=$((bench_end - SECONDS)); [ $remaining -lt 5 ] && { log "benchmark: no time left for $case and after"; break; }
  timeout $((remaining < 60 ? remaining : 60)) python3 scripts/benchmark.py --device cuda --only $case --output "$out/benchmark-cuda.json" 2>&1 \
    | grep -v "^results written" | tee -a "$out/benchmark.log" || log "benchmark $case: stopped (time limit or error)"
done
fi

if wants dbn; then
dbn_state=zoo/training/${DBN_STATE:-dbn-binarized_mnist}
log "zoo DBN recipe ${DBN_RECIPE:-zoo_dbn_500_2000_fresh_chains1000} on cuda, from $dbn_state"
mkdir -p /tmp/dbn-run && { [ -d "$dbn_state" ] && cp -r "$dbn_state"/. /tmp/dbn-run/; }
timeout "${DBN_SECONDS:-110}" python3 scripts/train.py +experiment=${DBN_RECIPE:-zoo_dbn_500_2000_fresh_chains1000} run_dir=/tmp/dbn-run resume=true device=cuda > "$out/dbn_train.log" 2>&1
log "dbn: exit $? after $(cat /tmp/dbn-run/layer*/metrics.jsonl 2>/dev/null | grep -c .) epoch lines in the layers' metrics"
tar -C /tmp -cf "$out/dbn-run.tar" dbn-run
fi

if wants dbm; then
dbm_state=zoo/training/${DBM_STATE:-dbm-binarized_mnist}
if [ -d /tmp/dbm-run ]; then log "zoo DBM recipe ${DBM_RECIPE:-zoo_dbm_500_1000_from_rbm_sampled_momentum05_averaged} on cuda, on from this machine's /tmp/dbm-run"
else log "zoo DBM recipe ${DBM_RECIPE:-zoo_dbm_500_1000_from_rbm_sampled_momentum05_averaged} on cuda, from $dbm_state"; mkdir -p /tmp/dbm-run && { [ -d "$dbm_state" ] && cp -r "$dbm_state"/. /tmp/dbm-run/; }; fi
dbm_seconds=${DBM_SECONDS:-110}; [ "$dbm_seconds" = rest ] && dbm_seconds=$(( $(left) - 75 ))
timeout "$dbm_seconds" python3 scripts/train.py +experiment=${DBM_RECIPE:-zoo_dbm_500_1000_from_rbm_sampled_momentum05_averaged} run_dir=/tmp/dbm-run resume=true device=cuda >> "$out/dbm_train.log" 2>&1
log "dbm: exit $? after $(grep -c . /tmp/dbm-run/metrics.jsonl) metric lines"
timeout 60 python3 scripts/dbm_depth.py --checkpoint /tmp/dbm-run/checkpoint.pt --num-test 1000 --device cuda > "$out/dbm_depth.json" 2>> "$out/dbm_train.log"
log "dbm depth: $(cut -c1-300 "$out/dbm_depth.json")"
tar -C /tmp -cf "$out/dbm-run.tar" dbm-run
fi

if wants raise; then
raise_seconds=$(( $(left) - 10 )); [ "${RAISE_SECONDS:-$raise_seconds}" -lt $raise_seconds ] && raise_seconds=$RAISE_SECONDS
log "reproduce_raise on cuda for $raise_seconds s"
timeout $raise_seconds python3 scripts/reproduce_raise.py ${RAISE_ARGS:---paper-scale --from-zoo models --models cd1-20 dbm-500-1000 pcd-500} \
  --device cuda --output /tmp/raise_cuda > "$out/raise_cuda.log" 2>&1
log "raise: exit $?"
[ -d /tmp/raise_cuda ] && tar -C /tmp -cf "$out/raise_cuda.tar" raise_cuda
fi
log "done"
