"""Benchmark cases: speed measurements returned as dicts that ``scripts/benchmark.py`` writes as JSON (never asserted in
unit tests).

Each case is a function ``case(device, **sizes) -> dict`` (its ``name``, the ``shape`` it ran and its timings);
:data:`pfzoo.studies.benchmark.suite.BENCHMARKS` maps a case's name to it and to a one-line summary of its result.

The sizes in the cases' defaults are the issue's, run on CUDA; on CPU the cases of
:data:`~pfzoo.studies.benchmark.suite.CPU_SIZES` run fewer steps or chains so the whole run takes minutes. Every case
records the sizes it actually ran in its ``shape``; the ``machine`` block (:mod:`pfzoo.studies.benchmark.results`)
records the device's name (the GPU, or the CPU model), torch's version and its threads.

The modules, one concept each:

- :mod:`~pfzoo.studies.benchmark.timing`: the clock (CUDA synchronized), the matmul bound and the AIS rates against it;
- :mod:`~pfzoo.studies.benchmark.workloads`: the random models the cases time;
- the cases: :mod:`~pfzoo.studies.benchmark.estimator_cases` (AIS, RAISE, HAIS),
  :mod:`~pfzoo.studies.benchmark.compiled_cases` (the same under ``torch.compile``),
  :mod:`~pfzoo.studies.benchmark.training_cases` (optimizer steps of the training principles),
  :mod:`~pfzoo.studies.benchmark.ising_cases` (MPF and Gibbs sampling on Ising models) and
  :mod:`~pfzoo.studies.benchmark.distributed_ais` (AIS across ``torch.distributed`` ranks, each rank a
  :mod:`~pfzoo.studies.benchmark.distributed_worker` process);
- :mod:`~pfzoo.studies.benchmark.summaries`: a case's result in one line;
- :mod:`~pfzoo.studies.benchmark.suite`: every case by name, with the CPU and ``--quick`` sizes;
- :mod:`~pfzoo.studies.benchmark.results`: the JSON document the script writes.
"""
