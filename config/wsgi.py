import os

from django.core.wsgi import get_wsgi_application

from config.runtime import tune_gc

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_wsgi_application()

# The tool-health feed's token polls are answered before Django's stack, everything else goes to
# Django untouched (dashboard/feed/fast.py). `django_application` is the server without it (the bench's old path).
from dashboard.feed.fast import FeedFastPath  # noqa: E402 - needs the apps get_wsgi_application loads

application = FeedFastPath(django_application)
tune_gc()
