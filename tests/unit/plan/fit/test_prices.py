"""The on-demand price table of `--goal cost` (plan/fit/prices.py): its lookups, what it leaves out on
purpose (SageMaker rates, Trn2), and that it prices only instance types the instance table knows."""

from __future__ import annotations

from neuronserve.plan.fit import instances, prices


def test_the_price_table() -> None:
    price = prices.on_demand(" INF2.xlarge", "us-east-1")
    assert price is not None and price.usd_per_hour == 0.7582 and prices.DATE in price.source
    assert prices.on_demand("ml.inf2.xlarge", "us-east-1") is None  # SageMaker rates: not tabulated
    assert prices.on_demand("inf2.xlarge", "mars-north-1") is None
    assert prices.on_demand("trn2.48xlarge", "us-east-1") is None
    assert set(prices.EC2) <= set(instances.INSTANCES)
    assert price.as_json() == {
        "usd_per_hour": 0.7582,
        "instance": "inf2.xlarge",
        "region": "us-east-1",
        "source": price.source,
    }
    assert all(usd > 0 for regions in prices.EC2.values() for usd in regions.values())
