import os

from django.core.wsgi import get_wsgi_application

from config.runtime import tune_gc

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()
tune_gc()
