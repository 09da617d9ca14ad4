"""The database itself holds one delivery per (alert, channel, event): a second worker or a retry
that slipped past lifecycle's check cannot queue a second notice."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard.models import Alert, AlertChannel, Delivery


@pytest.fixture
def alert_and_channel(project):
    now = timezone.now()
    alert = Alert.objects.create(project=project, tool="search_kb", kind="retry_rise_flat_error", opened_at=now,
                                 last_seen_at=now)  # fmt: skip
    channel = AlertChannel.objects.create(project=project, kind="email", name="Mail", target="oncall@example.com")
    return alert, channel


def test_a_second_delivery_of_the_same_event_to_the_same_channel_is_refused(alert_and_channel):
    alert, channel = alert_and_channel
    Delivery.objects.create(alert=alert, channel=channel, event=Delivery.Event.OPENED)

    with pytest.raises(IntegrityError), transaction.atomic():
        Delivery.objects.create(alert=alert, channel=channel, event=Delivery.Event.OPENED)

    Delivery.objects.create(alert=alert, channel=channel, event=Delivery.Event.RESOLVED)  # another event: its own notice
    assert Delivery.objects.filter(alert=alert).count() == 2


def test_channel_tests_belong_to_no_alert_and_may_repeat(alert_and_channel):
    _, channel = alert_and_channel
    Delivery.objects.create(channel=channel, event=Delivery.Event.TEST)
    Delivery.objects.create(channel=channel, event=Delivery.Event.TEST)

    assert Delivery.objects.filter(alert=None).count() == 2
