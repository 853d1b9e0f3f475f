"""The Kubernetes guide's values file, checked as helm checks it before rendering the chart.

helm merges a user's values over the chart's defaults (maps key by key, everything else
replaced, ``null`` removes the key) and validates the result against the chart's
``values.schema.json``. deploy/kubernetes/chart/ holds both, from Zero to JupyterHub's
repository at the commit its SOURCE file names; the schema forbids unknown keys at almost every
level, so a misspelt key fails here as it fails `helm install`.
"""

from __future__ import annotations

import ast
import copy
import json
import re

import jsonschema
import pytest
import yaml

from support import REPO

KUBE = REPO / "deploy" / "kubernetes"


def helm_merge(defaults: dict, values: dict) -> dict:
    """``values`` over ``defaults`` as helm coalesces them."""
    merged = copy.deepcopy(defaults)
    for key, value in values.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = helm_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def schema_errors(values: dict) -> list[str]:
    schema = json.loads((KUBE / "chart" / "values.schema.json").read_text())
    defaults = yaml.safe_load((KUBE / "chart" / "values.yaml").read_text())
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator.iter_errors(helm_merge(defaults, values))]


@pytest.fixture
def values() -> dict:
    return yaml.safe_load((KUBE / "values.yaml").read_text())


def test_the_chart_defaults_pass_their_own_schema():
    assert schema_errors({}) == []


def test_the_guide_values_pass_the_chart_schema(values):
    assert schema_errors(values) == []


@pytest.mark.parametrize("path, misspelt", [
    (("singleuser",), "memmory"),
    (("hub",), "loadRole"),
    (("cull",), "timout"),
    ((), "singleusers"),
])
def test_a_misspelt_key_fails_the_schema(values, path, misspelt):
    node = values
    for key in path:
        node = node[key]
    right = {"memmory": "memory", "loadRole": "loadRoles", "timout": "timeout", "singleusers": "singleuser"}[misspelt]
    node[misspelt] = node.pop(right)
    errors = schema_errors(values)
    assert any(f"'{misspelt}' was unexpected" in e for e in errors), errors


def test_a_value_of_the_wrong_type_fails_the_schema(values):
    values["cull"]["enabled"] = "yes"
    assert any(e.startswith("cull.enabled: 'yes' is not of type 'boolean'") for e in schema_errors(values))


def test_the_values_say_what_the_guide_says(values):
    """ngshare is the hub's service and every server's exchange; only instructors get the formgrader."""
    hub, singleuser = values["hub"], values["singleuser"]
    ngshare = hub["services"]["ngshare"]
    exchange = singleuser["extraFiles"]["nbgrader-exchange"]
    assert exchange["mountPath"] == "/etc/jupyter/nbgrader_config.py"
    ast.parse(exchange["stringData"])  # the config file each server loads is Python that parses
    assert f'configureExchange(c, "{ngshare["url"]}/services/ngshare")' in exchange["stringData"]
    assert "access:services!service=ngshare" in hub["loadRoles"]["user"]["scopes"]
    override = hub["config"]["KubeSpawner"]["group_overrides"]["01-instructors"]
    assert override["groups"] == ["instructors"] and "instructors" in hub["config"]["JupyterHub"]["load_groups"]
    # each role's configuration first, everyone's after it, as on the one-machine hub; each a folder
    # of deploy/hub/ that the image copies
    dockerfile = (REPO / "deploy" / "kubernetes" / "Dockerfile").read_text()
    copied = dict((target, source) for source, target in re.findall(r"^COPY (deploy/hub/\S+) (\S+)$", dockerfile, re.M))
    for role, path in [("student", singleuser["extraEnv"]["JUPYTER_CONFIG_PATH"]),
                       ("instructor", override["spawner_override"]["environment"]["JUPYTER_CONFIG_PATH"])]:
        folders = path.split(":")
        assert [f.rsplit("/", 1)[-1] for f in folders] == [role, "everyone"], path
        assert all(f in copied and (REPO / copied[f]).is_dir() for f in folders), (path, copied)
    assert values["cull"]["enabled"] is True
    assert {"guarantee", "limit"} <= set(singleuser["memory"]) and {"guarantee", "limit"} <= set(singleuser["cpu"])
