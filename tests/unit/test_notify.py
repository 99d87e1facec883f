"""What leaves the machine, the pure parts: destinations and their ids and labels, signatures,
event bodies (a contract), Slack's and mail's text, the [notify] and [[sink]] settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crawlfleet.config import Settings, load_settings
from crawlfleet.data.profile import FieldStats, RunProfile, build_profile
from crawlfleet.errors import ConfigError
from crawlfleet.monitor.quality import Breach
from crawlfleet.notify.destinations import destinations
from crawlfleet.notify.payloads import (
    alert_body,
    changes_body,
    dumps,
    email_text,
    run_finished_body,
    slack_body,
)
from crawlfleet.notify.signing import sign, verify

SLACK = "https://hooks.slack.test/services/T000/B000/SECRETPATH"


def _settings(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "crawlfleet.toml"
    path.write_text(text)
    return load_settings(path)


def test_destinations_have_stable_ids_and_labels_that_hide_the_endpoint(tmp_path: Path) -> None:
    text = f"""
[notify]
webhook = ["https://user:pw@hooks.test:8443/in/TOKEN?key=kqx", "http://127.0.0.1:9/hook"]
secret = "s3cret"
slack_webhook = "{SLACK}"
smtp = "smtp://mailer:pw@127.0.0.1:2525"
email_to = ["ops@example.test"]

[[sink]]
url = "http://10.0.0.5/records?token=zzz"
name = "warehouse"
batch = 50

[[sink]]
url = "http://127.0.0.1:9/other"
"""
    s = _settings(tmp_path, text)
    dests = destinations(s)
    assert [d.kind for d in dests] == ["webhook", "webhook", "slack", "email", "sink", "sink"]
    assert [d.id for d in dests] == [d.id for d in destinations(_settings(tmp_path, text))]
    assert len({d.id for d in dests}) == len(dests)
    assert dests[4].id == "sink:warehouse" and dests[4].batch == 50
    shown = " ".join([*(d.label for d in dests), *(d.id for d in dests), repr(dests), repr(s)])
    for secret in ("TOKEN", "pw", "kqx", "SECRETPATH", "s3cret", "zzz", "user:"):
        assert secret not in shown, secret
    assert "hooks.test:8443" in dests[0].label
    assert dests[0].wants("alert") and dests[0].wants("run_finished")
    assert not dests[0].wants("changes") and dests[4].wants("changes")
    assert dests[0].secret == "s3cret" and dests[2].secret == ""


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('[notify]\nwebhook = "ftp://x"', "a webhook is an http(s) URL"),
        ('[notify]\nemail_to = "a@b"', "email_to needs smtp"),
        ('[notify]\nevents = ["changes"]', "changes go to records sinks"),
        ('[notify]\nevents = ["alerts"]', "unknown event 'alerts'"),
        ("[notify]\ntries = 0", "tries must be at least 1"),
        ('[notify]\nwebhok = "http://x"', "did you mean 'notify.webhook'"),
        ('[[sink]]\nkind = "kafka"\nurl = "http://x"', "unknown sink kind 'kafka'"),
        ("[[sink]]\nbatch = 5", "needs url"),
        ('[[sink]]\nurl = "http://x"\nbach = 5', "did you mean 'batch'"),
        ('[[sinks]]\nurl = "http://x"', "did you mean 'sink'"),
        ("[quality]\ncoverage = { price = 2 }", "share from 0 to 1"),
        ("[quality]\nitem_drop = 1.5", "share from 0 to 1"),
        ('[quality]\ncoverage = { price = "all" }', "must be a number"),
    ],
)
def test_bad_notify_sink_and_quality_settings_are_one_line(
    tmp_path: Path, text: str, error: str
) -> None:
    with pytest.raises(ConfigError, match=error.replace("(", r"\(").replace(")", r"\)")):
        _settings(tmp_path, text)


def test_quality_and_notify_take_overrides_and_false_turns_a_monitor_off(tmp_path: Path) -> None:
    s = _settings(tmp_path, "[quality]\nitem_drop = false\nmax_run_time = 3600\n")
    assert s.quality.item_drop is None and s.quality.max_run_time == 3600.0
    s = Settings.of(**{"notify.webhook": "http://127.0.0.1:9/h", "quality.min_records": "3"})
    assert s.notify.webhook == ("http://127.0.0.1:9/h",) and s.quality.min_records == 3


def test_signatures() -> None:
    body = b'{"event":"alert"}'
    header = sign("s3cret", body)
    assert header.startswith("sha256=") and len(header) == 7 + 64
    assert verify("s3cret", body, header)
    assert not verify("other", body, header)
    assert not verify("s3cret", body + b" ", header)
    assert not verify("s3cret", body, None)
    # the well-known HMAC-SHA256 value of this key and message
    assert sign("key", b"The quick brown fox jumps over the lazy dog") == (
        "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    )


BREACH = Breach(
    "field_coverage",
    0.7,
    1.0,
    0.1,
    "rating: coverage 70.0%, down 30.0 points",
    field="rating",
    examples="missing_field",
)


def test_an_alerts_body_has_the_contracts_keys() -> None:
    ex = [
        {
            "kind": "record",
            "key": "p7",
            "url": "http://shop.test/p/7",
            "warc_file": "a.warc.gz",
            "warc_record_id": "<urn:uuid:1>",
        }
    ]
    body = alert_body("alert:shop:2:field_coverage:rating", "shop", 2, BREACH, ex, 5.0)
    assert set(body) >= {
        "event",
        "alert",
        "job",
        "run",
        "severity",
        "message",
        "value",
        "baseline",
        "examples",
        "field",
        "idempotency_key",
    }
    assert (body["event"], body["alert"], body["field"], body["value"], body["baseline"]) == (
        "alert",
        "field_coverage",
        "rating",
        0.7,
        1.0,
    )
    assert body["examples"] == ex
    no_field = alert_body("k", "shop", 2, Breach("item_count", 60, 100, 0.3, "m"), [], 5.0)
    assert "field" not in no_field
    assert json.loads(dumps(body)) == body


def test_run_finished_and_changes_bodies() -> None:
    base = RunProfile(
        "shop",
        2,
        at=10.0,
        started_at=1.0,
        finished_at=9.0,
        final=True,
        records=3,
        quarantined=1,
        pages=4,
    )
    p = build_profile(base, {"sku": FieldStats("sku", 3, 3, 3, 3)}, {"sku": "text"})
    body = run_finished_body("run_finished:shop:2", p, ["item_count"])
    assert (body["event"], body["job"], body["run"], body["alerts"]) == (
        "run_finished",
        "shop",
        2,
        ["item_count"],
    )
    assert body["summary"]["records"] == 3 and body["summary"]["duration"] == 8.0
    assert RunProfile.from_json(body["profile"]) == p
    ch = changes_body("changes:shop:2:w:1", "shop", 2, "w", 1, [{"key": "a", "status": "new"}])
    assert (ch["event"], ch["batch"], ch["sink"], ch["records"]) == (
        "changes",
        1,
        "w",
        [{"key": "a", "status": "new"}],
    )


def test_slack_and_mail_say_what_and_where() -> None:
    ex = [{"kind": "record", "key": "p7", "url": "http://u:pw@shop.test/p/7"}]
    body = alert_body("k", "shop", 2, BREACH, ex, 5.0)
    text = slack_body(body)["text"]
    assert "shop run 2" in text and "field_coverage" in text and "`rating`" in text
    assert "baseline 100.0%" in text and "shop.test/p/7" in text and "pw" not in text
    subject, mail = email_text(body)
    assert "shop run 2" in subject and "field_coverage" in subject
    assert "examples:" in mail and '"idempotency_key": "k"' in mail
