"""Research code above training, used by the scripts: estimator cards, pilots, sweeps, capacity and recovery studies,
benchmark cases and report rendering. Each returns structured results (dataclasses, dicts, markdown strings) that a
script composes and writes; nothing here parses logs or prints."""
