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
    assert "now $20.00/h, $14,600.00/month" in text and "at max 4: unpriced/h, unpriced/month" in text
    assert "total: $20.00/h, $14,600.00/month, unknown now; unpriced/h, unpriced/month, unknown at max size" in text


def test_no_estimate_no_lines():
    assert estimate_lines({}) == []


def test_unpriced_lines_are_counted_and_named_after_the_total():
    est = {
        "nodeGroups": [{**GROUP, "usdPerHour": 20.0, "usdPerHourAtMax": 40.0}],
        "fixed": [
            {"name": "FSx for OpenZFS /home 128 GiB", "usdPerHour": None, "kw": 0, "source": "unpriced: no figures"},
            {"name": "SSH load balancer (internal)", "usdPerHour": None, "kw": 0, "source": "unpriced: no figures"},
        ],
        "usdPerHour": 20.0,
        "usdPerHourAtMax": 40.0,
        "unpriced": ["FSx for OpenZFS /home 128 GiB", "SSH load balancer (internal)"],
    }
    text = "\n".join(estimate_lines(est))
    assert "FSx for OpenZFS /home 128 GiB          unpriced/h, unpriced/month [2]" in text
    assert (
        "total: $20.00/h, $14,600.00/month, unknown now; $40.00/h, $29,200.00/month, unknown at max size; 2 lines "
        "unpriced, not in these totals: FSx for OpenZFS /home 128 GiB, SSH load balancer (internal)"
    ) in text


def test_a_line_that_follows_the_node_groups_shows_its_figure_at_max_and_a_cent_fraction():
    monitoring = {"name": "Monitoring", "usdPerHour": 0.0158, "usdPerHourAtMax": 0.4612, "kw": 0, "source": "amp"}
    secrets = {"name": "Secrets Manager 1 secret(s)", "usdPerHour": 0.000616, "kw": 0, "source": "sm"}
    est = {"nodeGroups": [], "fixed": [monitoring, secrets], "usdPerHour": 0.02, "usdPerHourAtMax": 0.46}
    text = "\n".join(estimate_lines(est))
    assert "Monitoring                             $0.02/h, $11.53/month; at max $0.46/h, $336.68/month [1]" in text
    assert "Secrets Manager 1 secret(s)            $0.0006/h, $0.45/month [2]" in text
