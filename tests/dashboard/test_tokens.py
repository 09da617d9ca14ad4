"""Personal API tokens: the services and the account/tokens/ page."""

import datetime as dt
import importlib

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import ValidationError
from django.utils import timezone

from dashboard import tokens
from dashboard.models import ApiToken
from ingest.models import hash_api_key

HOSTILE = "<script>alert(1)</script><b>x</b>"
URL = "/account/tokens/"


# --- services -------------------------------------------------------------------------


def test_a_new_token_is_returned_once_and_only_its_hash_is_stored(member):
    token, plain = tokens.api_token_create(user=member, name="ci")

    assert plain.startswith("twu_") and len(plain) > 40
    assert token.hashed_token == hash_api_key(plain)
    assert plain not in {token.prefix, token.hashed_token}
    assert plain.startswith(token.prefix) and len(token.prefix) == len("twu_") + 8


def test_a_token_needs_a_name(member):
    with pytest.raises(ValueError, match="name the token"):
        tokens.api_token_create(user=member, name="   ")


def test_a_token_cannot_expire_in_the_past(member):
    with pytest.raises(ValueError, match="in the past"):
        tokens.api_token_create(user=member, name="ci", expires_at=timezone.now() - dt.timedelta(days=1))


def test_a_token_gets_all_scopes_unless_told_which(member):
    every, _ = tokens.api_token_create(user=member, name="script")
    some, _ = tokens.api_token_create(user=member, name="ci", scopes=["admin", "runs", "runs"])

    assert every.scopes == ["read", "runs", "admin"]
    assert some.scopes == ["runs", "admin"]  # each once, in the order of tokens.SCOPES


@pytest.mark.parametrize("scopes, message", [([], "at least one scope"), (["read", "root"], "unknown scope 'root'")])
def test_a_token_needs_known_scopes(member, scopes, message):
    with pytest.raises(ValueError, match=message):
        tokens.api_token_create(user=member, name="ci", scopes=scopes)
    assert not ApiToken.objects.exists()


def test_the_model_refuses_unknown_or_repeated_scopes(member):
    token, _ = tokens.api_token_create(user=member, name="ci", scopes=["read"])

    for bad in ([], ["read", "read"], ["sudo"], "read"):
        token.scopes = bad
        with pytest.raises(ValidationError):
            token.full_clean()


def test_tokens_made_before_scopes_get_all_of_them(member):
    migration = importlib.import_module("dashboard.migrations.0008_token_scopes")
    token, _ = tokens.api_token_create(user=member, name="old")
    ApiToken.objects.filter(pk=token.pk).update(scopes=[])

    migration.grant_all_scopes(django_apps, None)

    token.refresh_from_db()
    assert token.scopes == list(tokens.SCOPES)


def test_authenticate_finds_the_active_token_and_its_user(member):
    _, plain = tokens.api_token_create(user=member, name="ci")

    assert tokens.api_token_authenticate(plain).user == member


@pytest.mark.parametrize(
    "case, message",
    [("unknown", "not recognised"), ("revoked", "was revoked"), ("expired", "expired at"), ("project key", "project ingest key")],
)
def test_authenticate_says_why_a_token_is_refused(member, case, message):
    token, plain = tokens.api_token_create(user=member, name="ci", expires_at=timezone.now() + dt.timedelta(days=1))
    now = timezone.now()
    if case == "unknown":
        plain = "twu_" + "x" * 43
    elif case == "revoked":
        tokens.api_token_revoke(user=member, token_id=token.pk)
    elif case == "expired":
        now += dt.timedelta(days=2)
    else:
        plain = "tw_" + "y" * 43

    with pytest.raises(tokens.TokenError, match=message):
        tokens.api_token_authenticate(plain, now=now)


def test_a_token_of_an_inactive_user_is_refused(member):
    _, plain = tokens.api_token_create(user=member, name="ci")
    member.is_active = False
    member.save()

    with pytest.raises(tokens.TokenError, match="inactive"):
        tokens.api_token_authenticate(plain)


def test_last_used_is_written_at_most_once_a_minute(member, django_assert_num_queries):
    token, _ = tokens.api_token_create(user=member, name="ci")
    now = timezone.now()

    with django_assert_num_queries(1):
        tokens.api_token_touch(token=token, now=now)
    with django_assert_num_queries(0):
        tokens.api_token_touch(token=token, now=now + dt.timedelta(seconds=59))
    with django_assert_num_queries(1):
        tokens.api_token_touch(token=token, now=now + dt.timedelta(seconds=60))

    token.refresh_from_db()
    assert token.last_used_at == now + dt.timedelta(seconds=60)


def test_a_user_cannot_revoke_another_users_token(member, outsider):
    token, _ = tokens.api_token_create(user=member, name="ci")

    with pytest.raises(ApiToken.DoesNotExist):
        tokens.api_token_revoke(user=outsider, token_id=token.pk)
    token.refresh_from_db()
    assert token.revoked_at is None


# --- the page -------------------------------------------------------------------------


def test_the_tokens_page_needs_a_login(client, db):
    response = client.get(URL)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_creating_a_token_shows_it_once_then_never_again(client, member):
    client.force_login(member)

    response = client.post(URL, {"name": "CI eval runner", "expires_in_days": "90", "scopes": ["runs"]}, follow=True)

    page = response.content.decode()
    token = ApiToken.objects.get(user=member)
    plain = response.context["new_token"]["plain"]
    assert response.redirect_chain == [(URL, 302)]
    assert token.hashed_token == hash_api_key(plain)
    assert plain in page
    assert token.expires_at.date() == (timezone.now() + dt.timedelta(days=90)).date()
    assert token.scopes == ["runs"]
    reloaded = client.get(URL).content.decode()
    assert plain not in reloaded
    assert f"{token.prefix}…" in reloaded
    assert f"<td><code>{token.prefix}…</code></td>\n      <td><code>runs</code></td>" in reloaded


def test_the_form_offers_the_three_scopes_with_only_read_ticked(client, member):
    client.force_login(member)

    page = client.get(URL).content.decode()

    for n, scope in enumerate(tokens.SCOPES):
        checked = " checked" if scope == "read" else ""
        assert f'<input type="checkbox" name="scopes" value="{scope}" id="id_scopes_{n}"{checked}>' in page
        assert tokens.SCOPE_HELP[scope] in page


def test_the_tokens_scopes_are_listed(client, member):
    tokens.api_token_create(user=member, name="everything")
    client.force_login(member)

    page = client.get(URL).content.decode()

    assert "<td><code>read</code>, <code>runs</code>, <code>admin</code></td>" in page


@pytest.mark.parametrize("scopes, message", [([], "Pick at least one scope"), (["sudo"], "Select a valid choice")])
def test_a_token_without_a_known_scope_gets_a_clear_error(client, member, scopes, message):
    client.force_login(member)

    response = client.post(URL, {"name": "ci", "expires_in_days": "", "scopes": scopes})

    assert response.status_code == 400
    assert message in response.content.decode()
    assert not ApiToken.objects.exists()


def test_a_token_without_a_name_gets_a_clear_error(client, member):
    client.force_login(member)

    response = client.post(URL, {"name": "", "expires_in_days": ""})

    assert response.status_code == 400
    assert "Name the token" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_a_bad_expiry_choice_is_named(client, member):
    client.force_login(member)

    response = client.post(URL, {"name": "ci", "expires_in_days": "7000"})

    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()


def test_token_names_are_shown_as_text(client, member):
    tokens.api_token_create(user=member, name=HOSTILE)
    client.force_login(member)

    page = client.get(URL).content.decode()

    assert HOSTILE not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in page


def test_the_page_lists_only_your_own_tokens(client, member, outsider):
    tokens.api_token_create(user=outsider, name="bobs-secret-token")
    tokens.api_token_create(user=member, name="alices-token")
    client.force_login(member)

    page = client.get(URL).content.decode()

    assert "alices-token" in page
    assert "bobs-secret-token" not in page


def test_revoking_a_token_marks_it_revoked_with_a_message(client, member):
    token, _ = tokens.api_token_create(user=member, name="ci")
    client.force_login(member)

    response = client.post(f"{URL}{token.pk}/revoke/", follow=True)

    token.refresh_from_db()
    assert token.revoked_at is not None
    page = response.content.decode()
    assert "revoked; requests with it now get a 401" in page
    assert "Revoked" in page


def test_revoke_is_drawn_as_a_danger_button_like_the_settings_revoke(client, member):
    tokens.api_token_create(user=member, name="ci")
    client.force_login(member)

    page = client.get(URL).content.decode()

    assert '<button type="submit" class="danger" aria-label="Revoke ci">Revoke</button>' in page


def test_revoking_needs_a_post(client, member):
    token, _ = tokens.api_token_create(user=member, name="ci")
    client.force_login(member)

    assert client.get(f"{URL}{token.pk}/revoke/").status_code == 405
    token.refresh_from_db()
    assert token.revoked_at is None


def test_revoking_another_users_token_is_a_404(client, member, outsider):
    token, _ = tokens.api_token_create(user=outsider, name="ci")
    client.force_login(member)

    assert client.post(f"{URL}{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_the_forms_carry_csrf_protection(member):
    from django.test import Client

    token, _ = tokens.api_token_create(user=member, name="ci")
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)

    assert client.post(URL, {"name": "x"}).status_code == 403
    assert client.post(f"{URL}{token.pk}/revoke/").status_code == 403
    assert 'name="csrfmiddlewaretoken"' in client.get(URL).content.decode()


def test_the_page_makes_a_fixed_number_of_queries(client, member, django_assert_max_num_queries):
    for n in range(5):
        token, _ = tokens.api_token_create(user=member, name=f"t{n}")
        tokens.api_token_touch(token=token, now=timezone.now())
    tokens.api_token_revoke(user=member, token_id=token.pk)
    client.force_login(member)

    with django_assert_max_num_queries(4):  # session, user, tokens (+ a session write when a token was shown)
        assert client.get(URL).status_code == 200
