"""The model comparison of Sohl-Dickstein & Culpepper (2011), Table 1 (and Fig. 5's size sweep) on whitened natural-image
patches: training every model from its recipe, evaluating it (exactly, or by HAIS after a step-size pilot), and the
report (what ``scripts/reproduce_models.py`` composes and writes).

:class:`~pfzoo.studies.model_comparison.comparison.ModelComparison` trains and evaluates the models one after another and
collects one row per model (the dicts results.json stores);
:func:`~pfzoo.studies.model_comparison.paired_differences.ordering` checks the paper's ordering on them with paired
differences; :func:`~pfzoo.studies.model_comparison.report.readme` and the figures of
:mod:`~pfzoo.studies.model_comparison.figures` render results.json's content alone. The training recipes are the
conf/experiment files; the comparison gets them composed through a ``recipe(name, seed, *overrides)`` callable, so it
needs no Hydra of its own. The sampler's acceptance and step size during training come from the objectives'
``adaptation`` records, the estimators' from their estimates' ``info``.

The modules, one concept each:

- :mod:`~pfzoo.studies.model_comparison.settings`: the comparison's fixed choices and run budgets;
- :mod:`~pfzoo.studies.model_comparison.setting_text`: how a HAIS setting is named in the rows and the report;
- :mod:`~pfzoo.studies.model_comparison.row_recorder`: what every model's row goes through (training from a recipe,
  the step-size pilot, the evaluation, recording the row);
- :mod:`~pfzoo.studies.model_comparison.comparison`: the models themselves, trained and evaluated in the table's order;
- :mod:`~pfzoo.studies.model_comparison.paired_differences`: the paper's ordering checked on the same patches;
- :mod:`~pfzoo.studies.model_comparison.data_description`: what the report says of the patches;
- :mod:`~pfzoo.studies.model_comparison.report` and :mod:`~pfzoo.studies.model_comparison.figures`: README.md and the
  plots, from results.json's content.
"""
