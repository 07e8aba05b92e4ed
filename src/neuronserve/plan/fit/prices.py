"""On-demand hourly prices (USD, Linux) of the Neuron instance types per region, for `--goal cost`. Data.

EC2 prices: SkyPilot's AWS catalog, github.com/skypilot-org/skypilot-catalog `catalogs/v8/aws/vms.csv` at
commit 00148f2af3672e2229b4f7bf8157d5a3f36e3c35 (read 2026-12-07; the catalog is regenerated from AWS's
price list API, its `Price` column is the on-demand Linux rate, the same in every zone of a region).
Rows with no on-demand price there are left out here: trn1.32xlarge outside the US regions below, and
trn2.3xlarge, trn2.48xlarge and trn2u.48xlarge, which that catalog lists without an on-demand price in
every region (Trn2 is sold through capacity blocks and savings plans). Trainium3 is not in it.
Re-checked 2026-12-07: aws/karpenter-provider-aws `pkg/providers/pricing/zz_generated.pricing_aws.go` at
commit 6fc13b5236fd04fd16ff3f9dc7490d0813994099 (generated 2026-07-20 from the AWS price list API,
us-east-1) has every inf2, trn1 and trn1n us-east-1 rate below, to the digit, and no trn2 entry; no EC2
instance type of Trainium3 exists (botocore 1.43.67's EC2 model, 2026-08-07, lists trn1, trn1n, trn2
only). A Trn2 or Trn3 cost ranking therefore needs `--price-per-hour`: no on-demand list rate exists.

SageMaker (`ml.` types) bills its own, higher hourly rate for the same hardware, so `ml.` names are looked
up in `SAGEMAKER`, never in `EC2`. No price-list data for SageMaker hosting was found in a public repository
(searched 2026-12-07: SkyPilot's catalog has none, nor vantage-sh/ec2instances.info's committed files, nor
any dump of the AmazonSageMaker offer file). The one table found is a third-party one, used with this note:
aws-samples/foundation-model-benchmarking-tool (FMBench) `fmbench/configs/pricing.yml` at commit
39ce6b9c3572bf620a60c288c5b473462c5bc2eb (file last changed 2025-01-26; these rows first appear in
2024-05-18's c0fbf367), its "SageMaker Hourly Instance Pricing". It is typed in by hand, not read from the
price list, and names no region: it is entered here for us-east-1 only, the tool's default region, whose
EC2 rates its EC2 rows beside them match. A blog (wring.co/blog/aws-sagemaker-inference-guide, 2026-03-15)
gives ml.inf2.xlarge at $0.76/h, the EC2 rate; FMBench itself carried the EC2 rates for ml.inf2 before
2024-05-18 and replaced them; the AWS sample is preferred. ml.trn1.2xlarge, ml.trn1n.32xlarge and
ml.trn2.48xlarge, and every other region, have no public dated rate found: no entry.

A price missing here is an error naming `--price-per-hour`, never a guess (commands/recommend.py).
"""

from __future__ import annotations

from dataclasses import dataclass

DATE = "2026-12-07"
SOURCE = (
    "skypilot-org/skypilot-catalog catalogs/v8/aws/vms.csv @00148f2af3672e2229b4f7bf8157d5a3f36e3c35 "
    f"(read {DATE})"
)
SAGEMAKER_SOURCE = (
    "third-party table: aws-samples/foundation-model-benchmarking-tool fmbench/configs/pricing.yml "
    f"@39ce6b9c3572bf620a60c288c5b473462c5bc2eb (2025-01-26, no region named, read as us-east-1; read {DATE})"
)
DEFAULT_REGION = "us-east-1"

# instance type (EC2, without `ml.`) -> region -> USD per hour, on demand, Linux
EC2: dict[str, dict[str, float]] = {
    "inf2.xlarge": {
        "us-east-1": 0.7582, "us-east-2": 0.7582, "us-west-2": 0.7582, "eu-west-1": 0.94775,
        "eu-west-2": 1.1373, "eu-west-3": 1.06148, "eu-central-1": 1.1373, "eu-north-1": 0.83402,
        "ap-northeast-1": 1.1373, "ap-northeast-2": 0.90984, "ap-south-1": 0.98566,
        "ap-southeast-1": 1.06148, "ap-southeast-2": 0.98566,
    },
    "inf2.8xlarge": {
        "us-east-1": 1.96786, "us-east-2": 1.96786, "us-west-2": 1.96786, "eu-west-1": 2.45982,
        "eu-west-2": 2.95179, "eu-west-3": 2.755, "eu-central-1": 2.95179, "eu-north-1": 2.16465,
        "ap-northeast-1": 2.95179, "ap-south-1": 2.55822, "ap-southeast-1": 2.755,
        "ap-southeast-2": 2.55822,
    },
    "inf2.24xlarge": {
        "us-east-1": 6.49063, "us-east-2": 6.49063, "us-west-2": 6.49063, "eu-west-1": 8.11329,
        "eu-west-2": 9.73595, "eu-west-3": 9.08689, "eu-central-1": 9.73595, "eu-north-1": 7.1397,
        "ap-northeast-1": 9.73595, "ap-south-1": 8.43782, "ap-southeast-1": 9.08689,
        "ap-southeast-2": 8.43782,
    },
    "inf2.48xlarge": {
        "us-east-1": 12.98127, "us-east-2": 12.98127, "us-west-2": 12.98127, "eu-west-1": 16.22658,
        "eu-west-2": 19.4719, "eu-west-3": 18.17377, "eu-central-1": 19.4719, "eu-north-1": 14.27939,
        "ap-northeast-1": 19.4719, "ap-south-1": 16.87565, "ap-southeast-1": 18.17377,
        "ap-southeast-2": 16.87565,
    },
    "trn1.2xlarge": {"us-east-1": 1.34375, "us-east-2": 1.34375, "us-west-2": 1.34375},
    "trn1.32xlarge": {"us-east-1": 21.5, "us-east-2": 21.5, "us-west-2": 21.5},
    "trn1n.32xlarge": {"us-east-1": 24.78, "us-east-2": 24.78, "us-west-2": 24.78},
}  # fmt: skip

# SageMaker real-time inference (`ml.` type, lower case) -> region -> USD per hour, on demand
SAGEMAKER: dict[str, dict[str, float]] = {
    "ml.inf2.xlarge": {"us-east-1": 0.99},
    "ml.inf2.8xlarge": {"us-east-1": 2.36},
    "ml.inf2.24xlarge": {"us-east-1": 7.79},
    "ml.inf2.48xlarge": {"us-east-1": 15.58},
    "ml.trn1.32xlarge": {"us-east-1": 28.497},
}


@dataclass(frozen=True)
class Price:
    usd_per_hour: float
    instance: str  # as given (`ml.` kept: it says which market)
    region: str | None
    source: str  # the table and its date, or `--price-per-hour`

    def as_json(self) -> dict[str, object]:
        return {
            "usd_per_hour": self.usd_per_hour,
            "instance": self.instance,
            "region": self.region,
            "source": self.source,
        }


def on_demand(instance_type: str, region: str) -> Price | None:
    """The table's price of `instance_type` (EC2 name, or `ml.` for SageMaker's own rates) in `region`;
    None when the table has none (see the module docstring)."""
    name = instance_type.strip().lower()
    if name.startswith("ml."):
        table, source = SAGEMAKER, f"SageMaker on-demand, {SAGEMAKER_SOURCE}"
    else:
        table, source = EC2, f"EC2 on-demand, {SOURCE}"
    usd = table.get(name, {}).get(region)
    return None if usd is None else Price(usd, name, region, source)
