"""Credential patterns of gitleaks' default rule set, as data for ingest/redact.py.

Pure data: no imports of the project, nothing compiled here.

Source: gitleaks (https://github.com/gitleaks/gitleaks), config/gitleaks.toml at commit
b58d3f102cf3a2c84cb7f923d05c25c9b1aed84b. MIT License, Copyright (c) 2019 Zachary Rice: the
patterns below are adapted from it (Go RE2 syntax rewritten for Python's re; gitleaks'
trailing "(?:[\\x60'\"\\s;]|\\\\[nr]|$)" boundary is redact.py's shared right boundary).
gitleaks' license, which applies to these patterns:

    Permission is hereby granted, free of charge, to any person obtaining a copy of this
    software and associated documentation files (the "Software"), to deal in the Software
    without restriction, including without limitation the rights to use, copy, modify,
    merge, publish, distribute, sublicense, and/or sell copies of the Software, and to
    permit persons to whom the Software is furnished to do so, subject to the following
    conditions: The above copyright notice and this permission notice shall be included in
    all copies or substantial portions of the Software. THE SOFTWARE IS PROVIDED "AS IS",
    WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE
    WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN
    NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR
    OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT
    OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.

Kept: the rules whose secret names itself, by a fixed prefix or shape (a token that is a
credential wherever it appears: in an attribute value, a traceback, a serialised argument).
Left out: gitleaks' ~110 context rules ("twitter … = <35 alphanumerics>", generic-api-key),
which redact.py covers by key (SECRET_KEY_WORDS) and by its key=value rule, and whose
entropy checks would cost the hot path; rules for files (pkcs12, kubernetes YAML, nuget
config, curl command lines); and prefixes too short to gate on cheaply (vault's "s.",
Twilio's "SK": "sk" is in every "task"). JWTs are gated on "eyJ" (base64 of '{"'), not "ey".

Each rule is (gitleaks id, starts, pattern): `starts` are the lower-cased literals a match
begins with (redact.py gates strings on them and tries the pattern only where one occurs),
`pattern` a Python regex that matches at such a start. Keep the two in step.
"""

from __future__ import annotations

RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("1password-secret-key", ("a3-",), r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"),
    ("1password-service-account-token", ("ops_ey",), r"ops_eyJ[a-zA-Z0-9+/]{250,}={0,3}"),
    ("age-secret-key", ("age-secret-key-1",), r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("adobe-client-secret", ("p8e-",), r"p8e-[a-zA-Z0-9]{32}"),
    ("alibaba-access-key-id", ("ltai",), r"LTAI[a-zA-Z0-9]{20}"),
    ("anthropic-api-key", ("sk-ant-",), r"sk-ant-(?:api03|admin01)-[a-zA-Z0-9_\-]{93}AA"),
    ("artifactory-api-key", ("akcp",), r"AKCp[A-Za-z0-9]{69}"),
    ("aws-access-token", ("a3t", "akia", "asia", "abia", "acca"), r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"),
    ("aws-amazon-bedrock-api-key-long-lived", ("absk",), r"ABSK[A-Za-z0-9+/]{109,269}={0,2}"),
    ("clojars-api-token", ("clojars_",), r"(?i:CLOJARS_)[a-zA-Z0-9]{60}"),
    ("databricks-api-token", ("dapi",), r"dapi[a-f0-9]{32}(?:-\d)?"),
    ("digitalocean-token", ("doo_v1_", "dop_v1_", "dor_v1_"), r"do[opr]_v1_[a-f0-9]{64}"),
    ("doppler-api-token", ("dp.pt.",), r"dp\.pt\.[a-zA-Z0-9]{43}"),
    ("duffel-api-token", ("duffel_",), r"duffel_(?:test|live)_[a-zA-Z0-9_\-=]{43}"),
    ("dynatrace-api-token", ("dt0c01.",), r"dt0c01\.[a-zA-Z0-9]{24}\.[a-zA-Z0-9]{64}"),
    ("easypost-api-token", ("ezak", "eztk"), r"EZ[AT]K[a-zA-Z0-9]{54}"),
    ("facebook-page-access-token", ("eaam", "eaac"), r"EAA[MC][a-zA-Z0-9]{100,}"),
    ("flutterwave-key", ("flwseck_test", "flwpubk_test"), r"FLW(?:SECK|PUBK)_TEST-[a-hA-H0-9]{12,32}(?:-X)?"),
    ("flyio-access-token", ("fo1_", "fm1", "fm2_"), r"(?:fo1_[\w-]{43}|fm1[ar]_[a-zA-Z0-9+/]{100,}={0,3}|fm2_[a-zA-Z0-9+/]{100,}={0,3})"),
    ("frameio-api-token", ("fio-u-",), r"fio-u-[a-zA-Z0-9\-_=]{64}"),
    ("gcp-api-key", ("aiza",), r"AIza[\w-]{35}"),
    ("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[0-9a-zA-Z]{36}"),
    ("github-fine-grained-pat", ("github_pat_",), r"github_pat_\w{82}"),
    ("gitlab-pat", ("glpat-",), r"glpat-[\w-]{20,300}(?:\.[0-9a-z]{9})?"),
    ("gitlab-tokens", ("gldt-", "glffct-", "glft-", "glrt-", "glsoat-"), r"gl(?:dt|ffct|ft|rt|soat)-[0-9a-zA-Z_\-]{20,300}(?:\.[0-9a-z]{9})?"),
    ("gitlab-incoming-mail-token", ("glimt-",), r"glimt-[0-9a-zA-Z_\-]{25}"),
    ("gitlab-kubernetes-agent-token", ("glagent-",), r"glagent-[0-9a-zA-Z_\-]{50}"),
    ("gitlab-oauth-app-secret", ("gloas-",), r"gloas-[0-9a-zA-Z_\-]{64}"),
    ("gitlab-ptt", ("glptt-",), r"glptt-[0-9a-f]{40}"),
    ("gitlab-cicd-job-token", ("glcbt-",), r"glcbt-[0-9a-zA-Z]{1,5}_[0-9a-zA-Z_-]{20}"),
    ("gitlab-rrt", ("gr1348941",), r"GR1348941[\w-]{20}"),
    ("gitlab-session-cookie", ("_gitlab_session=",), r"_gitlab_session=[0-9a-z]{32}"),
    ("grafana-api-key", ("eyjrijoi",), r"eyJrIjoi[A-Za-z0-9]{70,400}={0,3}"),
    ("grafana-cloud-api-token", ("glc_",), r"glc_[A-Za-z0-9+/]{32,400}={0,3}"),
    ("grafana-service-account-token", ("glsa_",), r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    ("harness-api-key", ("pat.", "sat."), r"(?:pat|sat)\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9]{24}\.[a-zA-Z0-9]{20}"),
    ("heroku-api-key-v2", ("hrku-aa",), r"HRKU-AA[0-9a-zA-Z_-]{58}"),
    ("huggingface-access-token", ("hf_",), r"hf_[a-zA-Z]{34}"),
    ("huggingface-organization-api-token", ("api_org_",), r"api_org_[a-zA-Z]{34}"),
    ("infracost-api-token", ("ico-",), r"ico-[a-zA-Z0-9]{32}"),
    ("intra42-client-secret", ("s-s4t2",), r"s-s4t2(?:ud|af)-[a-fA-F0-9]{64}"),
    ("jwt", ("eyj",), r"eyJ[a-zA-Z0-9]{16,}\.ey[a-zA-Z0-9/\\_-]{17,}\.(?:[a-zA-Z0-9/\\_-]{10,}={0,2})?"),
    ("linear-api-key", ("lin_api_",), r"lin_api_[a-zA-Z0-9]{40}"),
    ("notion-api-token", ("ntn_",), r"ntn_[0-9]{11}[A-Za-z0-9]{35}"),
    ("npm-access-token", ("npm_",), r"npm_[a-zA-Z0-9]{36}"),
    ("openai-api-key", ("sk-",), r"sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}"),
    ("openshift-user-token", ("sha256~",), r"sha256~[\w-]{43}"),
    ("perplexity-api-key", ("pplx-",), r"pplx-[a-zA-Z0-9]{48}"),
    ("planetscale-token", ("pscale_tkn_", "pscale_oauth_", "pscale_pw_"), r"pscale_(?:tkn|oauth|pw)_[\w=.-]{32,64}"),
    ("postman-api-token", ("pmak-",), r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    ("prefect-api-token", ("pnu_",), r"pnu_[a-zA-Z0-9]{36}"),
    ("pulumi-api-token", ("pul-",), r"pul-[a-f0-9]{40}"),
    ("pypi-upload-token", ("pypi-ageichlwas5vcmc",), r"pypi-AgEIcHlwaS5vcmc[\w-]{50,1000}"),
    ("readme-api-token", ("rdme_",), r"rdme_[a-z0-9]{70}"),
    ("rubygems-api-token", ("rubygems_",), r"rubygems_[a-f0-9]{48}"),
    ("scalingo-api-token", ("tk-us-",), r"tk-us-[\w-]{48}"),
    ("sendgrid-api-token", ("sg.",), r"SG\.[a-zA-Z0-9=_\-.]{66}"),
    ("sendinblue-api-token", ("xkeysib-",), r"xkeysib-[a-f0-9]{64}-[a-zA-Z0-9]{16}"),
    ("sentry-user-token", ("sntryu_",), r"sntryu_[a-f0-9]{64}"),
    ("sentry-org-token", ("sntrys_",), r"sntrys_eyJpYXQiO[a-zA-Z0-9+/]{10,400}={0,2}_[a-zA-Z0-9+/]{43}"),
    ("settlemint-access-token", ("sm_aat_", "sm_pat_", "sm_sat_"), r"sm_(?:aat|pat|sat)_[a-zA-Z0-9]{16}"),
    ("shippo-api-token", ("shippo_",), r"shippo_(?:live|test)_[a-fA-F0-9]{40}"),
    ("shopify-token", ("shpat_", "shpca_", "shppa_", "shpss_"), r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("slack-app-token", ("xapp-",), r"(?i:xapp)-\d-[A-Z0-9]+-\d+-[a-z0-9]+"),
    ("slack-token", ("xox",), r"xox[abeoprs]-[0-9A-Za-z\-]{10,}"),
    ("slack-config-access-token", ("xoxe.",), r"xoxe\.xox[bp]-\d-[A-Za-z0-9]{163,166}"),
    ("slack-webhook-url", ("hooks.slack.com",), r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}"),
    ("square-access-token", ("sq0atp-", "eaaa"), r"(?:EAAA|sq0atp-)[\w-]{22,60}"),
    ("stripe-access-token", ("sk_", "rk_"), r"[sr]k_(?:test|live|prod)_[a-zA-Z0-9]{10,99}"),
    ("vault-token", ("hvs.", "hvb."), r"(?:hvs\.[\w-]{90,120}|hvb\.[\w-]{138,300})"),
)
