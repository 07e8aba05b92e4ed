"""The on-demand price table of `--goal cost` (plan/fit/prices.py): its lookups, SageMaker's own rates for
`ml.` names (never the EC2 rate), what it leaves out on purpose (Trn2, regions without a dated rate), and
that it prices only instance types the instance table knows."""

from __future__ import annotations

from neuronserve.plan.fit import instances, prices


def test_the_price_table() -> None:
    price = prices.on_demand(" INF2.xlarge", "us-east-1")
    assert price is not None and price.usd_per_hour == 0.7582 and prices.DATE in price.source
    assert prices.on_demand("inf2.xlarge", "mars-north-1") is None
    assert prices.on_demand("trn2.48xlarge", "us-east-1") is None
    assert set(prices.EC2) | {n.removeprefix("ml.") for n in prices.SAGEMAKER} <= set(instances.INSTANCES)
    assert price.as_json() == {
        "usd_per_hour": 0.7582,
        "instance": "inf2.xlarge",
        "region": "us-east-1",
        "source": price.source,
    }
    for table in (prices.EC2, prices.SAGEMAKER):
        assert all(usd > 0 for regions in table.values() for usd in regions.values())


def test_an_ml_name_gets_sagemakers_rate_never_the_ec2_one() -> None:
    sm = prices.on_demand(" ML.inf2.48xlarge", "us-east-1")
    ec2 = prices.on_demand("inf2.48xlarge", "us-east-1")
    assert sm is not None and ec2 is not None
    assert sm.usd_per_hour == 15.58 and sm.instance == "ml.inf2.48xlarge"
    assert sm.usd_per_hour > ec2.usd_per_hour
    assert "SageMaker" in sm.source and prices.DATE in sm.source and "SageMaker" not in ec2.source
    assert all(name.startswith("ml.") for name in prices.SAGEMAKER)
    # where SageMaker has no dated rate, the EC2 one is not borrowed
    assert prices.on_demand("ml.inf2.48xlarge", "eu-west-1") is None
    assert prices.on_demand("ml.trn1.2xlarge", "us-east-1") is None
    assert prices.on_demand("ml.trn2.48xlarge", "us-east-1") is None
