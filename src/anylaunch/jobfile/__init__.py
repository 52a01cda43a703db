"""The job file: YAML with line marks, `${VAR}` and pins, `--set`, AutoModel
recipes, and the checks that turn it into a JobSpec."""
