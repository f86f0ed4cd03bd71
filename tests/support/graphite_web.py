"""Runs Debian's graphite-web (1.1.8) on 127.0.0.1 for the tests, over whisper files it writes.

Usage: python3 graphite_web.py DIR DATAFILE

DATAFILE holds one point a line: `metric.path unix_seconds value`. Every metric becomes a whisper
file under DIR/whisper (one archive: 60 s points for 7 days, so the render API answers from
the stored points, never a rollup), written with whisper.update_many. Points must lie within
the last 7 days and not in the future: graphite-web's whisper reader fetches up to the real
now only. graphite-web then runs under this interpreter (Debian's python3, where Django and
graphite live) with its own settings module, no carbon links and no cluster (the render API
reads the whisper files directly), on a threaded WSGI server bound to 127.0.0.1 on a port the
kernel picks. The first line on stdout is `listening PORT`.
"""

import os
import sys


def write_data(whisper_dir, data_file):
    import whisper

    points = {}
    with open(data_file) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 3:
                continue
            name, ts, value = parts
            points.setdefault(name, []).append((int(ts), float(value)))
    newest = max((p[0] for ps in points.values() for p in ps), default=0)
    for name, ps in points.items():
        path = os.path.join(whisper_dir, *name.split(".")) + ".wsp"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        whisper.create(path, [(60, 7 * 1440)], xFilesFactor=0.0, aggregationMethod="average")
        whisper.update_many(path, ps, now=max(newest, ps[-1][0]) + 1)


def settings(directory):
    whisper_dir = os.path.join(directory, "whisper")
    log_dir = os.path.join(directory, "log")
    os.makedirs(log_dir, exist_ok=True)
    module = os.path.join(directory, "rollgate_graphite_settings.py")
    with open(module, "w") as f:
        f.write(
            f"""
SECRET_KEY = 'rollgate-tests'
ALLOWED_HOSTS = ['*']
TIME_ZONE = 'UTC'
DEBUG = False
GRAPHITE_ROOT = '/usr/share/graphite-web'
CONF_DIR = {directory!r}
STORAGE_DIR = {directory!r}
WHISPER_DIR = {whisper_dir!r}
STANDARD_DIRS = [{whisper_dir!r}]
LOG_DIR = {log_dir!r}
INDEX_FILE = {os.path.join(directory, 'index')!r}
DATABASES = {{'default': {{'NAME': {os.path.join(directory, 'graphite.db')!r},
    'ENGINE': 'django.db.backends.sqlite3', 'USER': '', 'PASSWORD': '', 'HOST': '', 'PORT': ''}}}}
CARBONLINK_HOSTS = []
CLUSTER_SERVERS = []
REPLICATION_FACTOR = 0
FUNCTION_PLUGINS = []
LOG_RENDERING_PERFORMANCE = False
LOG_CACHE_PERFORMANCE = False
LOG_ROTATION = False
DEFAULT_XFILES_FACTOR = 0
"""
        )
    sys.path.insert(0, directory)
    os.environ["GRAPHITE_SETTINGS_MODULE"] = "rollgate_graphite_settings"
    os.environ["DJANGO_SETTINGS_MODULE"] = "graphite.settings"
    return whisper_dir


def main():
    directory, data_file = sys.argv[1], sys.argv[2]
    whisper_dir = settings(directory)
    write_data(whisper_dir, data_file)

    import django

    django.setup()
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from graphite.wsgi import application

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    httpd = make_server("127.0.0.1", 0, application, server_class=Server, handler_class=Quiet)
    print(f"listening {httpd.server_address[1]}", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
