"""The estimate's text (gpucluster.tools.plan.show.estimate): monthly figures, price sources as notes, older plans."""

from __future__ import annotations

from gpucluster.tools.plan.show.estimate import estimate_lines

GROUP = {"nodeGroup": "p5", "instanceType": "p5.48xlarge", "desired": 2, "max": 4, "reserved": 0, "usdPerNodeHour": 10.0}


def test_each_source_is_one_numbered_note_with_its_date():
    est = {
        "region": "eu-west-1",
        "hoursPerMonth": 730,
        "nodeGroups": [
            {
                **GROUP,
                "capacityType": "spot",
                "usdPerHour": 20.0,
                "usdPerHourAtMax": 40.0,
                "usdPerMonth": 14600.0,
                "usdPerMonthAtMax": 29200.0,
                "kw": 20.4,
                "kwAtMax": 40.8,
                "priceSource": "eu-west-1 spot: x",
                "priceDate": "2026-11-25",
            },
            {
                **GROUP,
                "nodeGroup": "p5b",
                "usdPerHour": 20.0,
                "usdPerHourAtMax": 40.0,
                "priceSource": "eu-west-1 spot: x",
                "priceDate": "2026-11-25",
            },
        ],
        "fixed": [{"name": "1 NAT gateway(s)", "usdPerHour": 0.045, "kw": 0, "source": "nat"}],
        "usdPerHour": 40.05,
        "usdPerHourAtMax": 80.05,
    }
    text = "\n".join(estimate_lines(est))
    assert text.startswith("Estimate in eu-west-1 (") and "a month is 730 h" in text
    assert "$10.00/node-hour, spot [1]" in text and "$10.00/node-hour, on-demand [1]" in text
    assert "  [1] eu-west-1 spot: x (recorded 2026-11-25)" in text and "  [2] nat" in text and "[3]" not in text
    assert "now $20.00/h, $14,600.00/month, 20.4 kW; at max 4: $40.00/h, $29,200.00/month, 40.8 kW" in text


def test_a_plan_without_monthly_figures_shows_730_times_the_hourly_ones():
    est = {"nodeGroups": [{**GROUP, "usdPerHour": 20.0, "usdPerHourAtMax": None}], "fixed": [], "usdPerHour": 20.0}
    text = "\n".join(estimate_lines(est))
    assert "now $20.00/h, $14,600.00/month" in text and "at max 4: unknown/h, unknown/month" in text
    assert "total: $20.00/h, $14,600.00/month, unknown now; unknown/h, unknown/month, unknown at max size" in text


def test_no_estimate_no_lines():
    assert estimate_lines({}) == []
