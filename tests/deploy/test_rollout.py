"""Blue/green updates (deploy/rollout.py): the UpdateEndpoint request, checked against botocore's service
model, and the rollout options it refuses. The update against a moto server is test_endpoint.py's."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("botocore")

from deploy_specs import FULL
from service_model import check

from neuronserve.deploy.rollout import Rollout, update_request


@pytest.mark.parametrize(
    "rollout",
    [Rollout(), Rollout(traffic="canary", canary_percent=10, alarms=("a", "b"), wait_interval_s=0)],
    ids=["all-at-once", "canary-alarms"],
)
def test_update_request_matches_the_sagemaker_model(rollout: Rollout) -> None:
    request = update_request(FULL, rollout)
    check("sagemaker", "UpdateEndpoint", request)
    assert request["EndpointConfigName"].startswith("ns-full-config-")


@pytest.mark.parametrize(
    ("rollout", "needle"),
    [
        (Rollout(traffic="linear"), "all-at-once or canary"),
        (Rollout(alarms=tuple(f"a{i}" for i in range(11))), "at most 10"),
        (Rollout(wait_interval_s=3601), "0 to 3600"),
        (Rollout(traffic="canary", canary_percent=60), "1 to 50"),
    ],
)
def test_rollout_refusals(rollout: Rollout, needle: str) -> None:
    from neuronserve.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(needle)):
        update_request(FULL, rollout)
