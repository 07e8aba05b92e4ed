"""config/fit.py: the fit-check options from their rows, in attribute order, each refusal naming its
variable; unset, they are the rows' defaults (the check refuses, the instance comes from the devices)."""

from __future__ import annotations

import pytest

from neuronserve.config.fit import FitOptions, parse_fit
from neuronserve.errors import ConfigError


def test_unset_is_refuse_with_the_instance_table() -> None:
    assert parse_fit({}) == FitOptions() == FitOptions(None, "refuse", None, None, False)


def test_every_option_is_read() -> None:
    fit = parse_fit(
        {
            "NEURONSERVE_INSTANCE_TYPE": " ml.inf2.xlarge ",
            "NEURONSERVE_FIT_CHECK": "WARN",
            "NEURONSERVE_HBM_GIB_PER_CORE": "16",
            "NEURONSERVE_HBM_OVERHEAD_GIB": "0",
            "NEURONSERVE_REQUIRE_CACHE_HIT": "true",
        }
    )
    assert fit == FitOptions("ml.inf2.xlarge", "warn", 16.0, 0.0, True)


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"NEURONSERVE_FIT_CHECK": "maybe"}, "NEURONSERVE_FIT_CHECK"),
        ({"NEURONSERVE_HBM_GIB_PER_CORE": "0"}, "NEURONSERVE_HBM_GIB_PER_CORE"),
        ({"NEURONSERVE_HBM_GIB_PER_CORE": "nan"}, "NEURONSERVE_HBM_GIB_PER_CORE"),
        ({"NEURONSERVE_HBM_OVERHEAD_GIB": "-1"}, "NEURONSERVE_HBM_OVERHEAD_GIB"),
        ({"NEURONSERVE_REQUIRE_CACHE_HIT": "yes"}, "NEURONSERVE_REQUIRE_CACHE_HIT"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], name: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_fit(env)
    assert err.value.variables == (name,)


def test_the_first_attribute_in_order_is_reported_first() -> None:
    with pytest.raises(ConfigError) as err:
        parse_fit({"NEURONSERVE_REQUIRE_CACHE_HIT": "yes", "NEURONSERVE_FIT_CHECK": "maybe"})
    assert err.value.variables == ("NEURONSERVE_FIT_CHECK",)
