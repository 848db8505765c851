"""The install check's driver: what a new user's site sees of django-sqlqueue installed from its
wheel. scripts/check_install.sh runs it in a copy of this directory, in a virtualenv holding only
the wheel, one step at a time:

    python check_site.py installed   # django_sqlqueue comes from that virtualenv, not a checkout
    python check_site.py enqueue     # one job that writes a Note, one that fails
    python manage.py runworker --burst
    python check_site.py jobs-done   # the Note exists; the jobs' rows say what happened
    python check_site.py admin       # every admin page of the app: 200, from the wheel's templates

Environment: SITE_CHECKOUT, the repository the wheel was built from (nothing may be imported from
it); SITE_EXPECT_DATABASE, ``sqlite`` or ``postgresql``; DATABASE_URL (see newsite/settings.py).
Each failure exits non-zero with a line saying what is wrong.
"""

import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "newsite.settings")

import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402
from newsite_app.models import Note  # noqa: E402
from newsite_app.tasks import fail_on_purpose, tick, write_note  # noqa: E402

import django_sqlqueue  # noqa: E402
from django_sqlqueue.models import Job, Queue, Schedule, Worker  # noqa: E402
from django_sqlqueue.workflows import chain  # noqa: E402

HERE = Path(__file__).resolve().parent
NOTE_TEXT = "written by a job, from the wheel"
LIVE_NOTE_TEXT = "written by a live worker"


class CheckFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CheckFailed(message)


def say(message):
    print(f"    {message}", flush=True)


def inside(path, directory) -> bool:
    return Path(path).resolve().is_relative_to(Path(directory).resolve())


# ---- installed -----------------------------------------------------------------------------
def installed():
    from importlib import metadata

    package_dir = Path(django_sqlqueue.__file__).resolve().parent
    checkout = os.environ["SITE_CHECKOUT"]
    say(f"django_sqlqueue {django_sqlqueue.__version__} from {package_dir}")
    say(f"Django {django.get_version()}, Python {sys.version.split()[0]}, venv {sys.prefix}")
    check(sys.prefix != sys.base_prefix, f"not running in a virtualenv: {sys.executable}")
    check(inside(package_dir, sys.prefix),
          f"django_sqlqueue is imported from {package_dir}, outside the virtualenv {sys.prefix}")
    check(not inside(package_dir, checkout),
          f"django_sqlqueue is imported from the checkout {checkout}, not from the wheel")
    on_path = [p for p in sys.path if p and inside(p, checkout)]
    check(not on_path, f"sys.path holds the checkout: {on_path}")
    dist = metadata.distribution("django-sqlqueue")
    direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
    check(not direct_url.get("dir_info", {}).get("editable"),
          f"django-sqlqueue is an editable install: {direct_url}")
    check(direct_url.get("url", "").endswith(".whl"),
          f"django-sqlqueue was not installed from a wheel: {direct_url}")
    say(f"installed from {direct_url['url'].rsplit('/', 1)[-1]}")
    cronsim = metadata.distribution("cronsim")  # the cron library: a dependency, no extra
    say(f"with cronsim {cronsim.version}, its one dependency besides Django")

    expected = os.environ["SITE_EXPECT_DATABASE"]
    check(connection.vendor == expected,
          f"the site's database is {connection.vendor}, expected {expected}")
    say(f"database: {connection.vendor} ({connection.settings_dict['NAME']})")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        has_psycopg = False
    else:
        has_psycopg = True
    if expected == "sqlite":  # installed without extras: no PostgreSQL driver anywhere
        check(not has_psycopg, "psycopg is installed, but the wheel went in without extras")
        say("no psycopg: a SQLite-only install")
    else:
        check(has_psycopg, "psycopg is missing, but the wheel went in with [postgres]")


# ---- jobs ------------------------------------------------------------------------------------
def enqueue():
    with transaction.atomic():
        ok = write_note.enqueue(NOTE_TEXT)
        failing = fail_on_purpose.enqueue("failing on purpose")
    say(f"enqueued job #{ok.pk} ({ok.task_name}) and job #{failing.pk} ({failing.task_name})")


def only_job(task) -> Job:
    jobs = list(Job.objects.filter(task_name=task.name))
    check(len(jobs) == 1, f"expected one job of {task.name}, found {len(jobs)}")
    return jobs[0]


def jobs_done():
    check(Note.objects.filter(text=NOTE_TEXT).exists(),
          f"the job did not write its Note ({NOTE_TEXT!r}); notes: "
          f"{list(Note.objects.values_list('text', flat=True))}")
    ok = only_job(write_note)
    check(ok.status == "succeeded", f"job #{ok.pk} is {ok.status}, expected succeeded "
                                    f"(errors: {ok.errors})")
    note = Note.objects.get(text=NOTE_TEXT)
    check(ok.result == {"note": note.pk}, f"job #{ok.pk} result is {ok.result!r}")
    say(f"job #{ok.pk} succeeded, result {ok.result}; the Note is there")
    failing = only_job(fail_on_purpose)
    check(failing.status == "exhausted", f"job #{failing.pk} is {failing.status}, expected "
                                         "exhausted (max_attempts=1)")
    check(failing.errors and "failing on purpose" in json.dumps(failing.errors),
          f"job #{failing.pk} does not record its error: {failing.errors!r}")
    say(f"job #{failing.pk} exhausted after {failing.attempts} attempt, its error recorded")


# ---- admin -----------------------------------------------------------------------------------
def show_log(path):
    lines = path.read_text().splitlines()[-30:]
    print(f"--- the last lines of {path.name}:", *lines, "---", sep="\n", file=sys.stderr)


def start_worker(log, log_path):
    """A worker that stays up, so the workers page has a live worker to show."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runworker", "--concurrency", "2", "--name", "install-check"],
        cwd=HERE, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        worker = Worker.objects.filter(pid=process.pid).first()
        if worker is not None:
            return process, worker
        if process.poll() is not None:
            show_log(log_path)
            raise CheckFailed(f"runworker exited with {process.returncode} at start-up")
        time.sleep(0.2)
    process.kill()
    process.wait()
    show_log(log_path)
    raise CheckFailed("runworker did not register itself as a Worker within 30s")


def stop_worker(process, worker, log_path):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        show_log(log_path)
        raise CheckFailed("runworker did not stop within 30s of SIGTERM") from None
    if code != 0:
        show_log(log_path)
    check(code == 0, f"runworker exited with {code} on SIGTERM, expected 0")
    check(not Worker.objects.filter(pk=worker.pk).exists(),
          "the stopped worker's row is still there")
    say("the worker stopped on SIGTERM (exit 0) and removed its row")


def wait_for(job, status, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status == status:
            return
        time.sleep(0.1)
    raise CheckFailed(f"job #{job.pk} is still {job.status} after {seconds}s, expected {status}")


def wait_for_tick(seconds=30) -> Schedule:
    """The site's schedule (newsite_app.tasks.tick, every second), once the live worker has
    synced it and run one of its jobs."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        row = Schedule.objects.filter(task_name=tick.name).first()
        if row is not None and Job.objects.filter(pk=row.last_job_id,
                                                  status="succeeded").exists():
            return row
        time.sleep(0.2)
    raise CheckFailed(f"the worker ran no job of the schedule of {tick.name} within {seconds}s")


def admin_pages():
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    # Records which templates each response rendered, and lets the client's host in.
    setup_test_environment()
    package_templates = Path(django_sqlqueue.__file__).resolve().parent / "templates"
    shipped = {str(p.relative_to(package_templates)) for p in package_templates.rglob("*.html")}
    check(shipped, f"the installed package has no templates in {package_templates}")

    user_model = get_user_model()
    user = user_model.objects.filter(username="admin").first()
    if user is None:
        user = user_model.objects.create_superuser("admin", "admin@example.com", "not-used")
    client = Client()
    client.force_login(user)

    ok, failing = only_job(write_note), only_job(fail_on_purpose)
    log_path = HERE / "worker.log"
    with open(log_path, "w") as log:
        process, worker = start_worker(log, log_path)
        try:
            say(f"a worker is up: {worker.name}")
            live = write_note.enqueue(LIVE_NOTE_TEXT)
            wait_for(live, "succeeded")
            say(f"it ran job #{live.pk}")
            ticked = wait_for_tick()
            say(f"it synced the schedule {ticked.name!r} and ran its job #{ticked.last_job_id}")
            # A workflow whose first job fails for good (its second is cancelled with it):
            # its page, and the confirmation of its "Retry failed jobs".
            flow = chain(fail_on_purpose.si("a workflow's first step fails"),
                         write_note.si("after the failed step")).enqueue()
            wait_for(flow.jobs[0], "exhausted")
            say(f"workflow {flow.id}: its first job failed, as meant to")
            jobs = reverse("admin:django_sqlqueue_job_changelist")
            # check_install.sh limited the queue "bulk" with manage.py queues
            limited = Queue.objects.get(name="bulk")
            pages = [
                ("the admin index", "get", reverse("admin:index"), {}, None),
                ("the app index", "get",
                 reverse("admin:app_list", kwargs={"app_label": "django_sqlqueue"}), {},
                 "app_index.html"),
                ("the job list", "get", jobs, {}, "job/change_list.html"),
                ("the queue dashboard", "get", reverse("admin:django_sqlqueue_job_dashboard"),
                 {}, "job/dashboard.html"),
                ("the dashboard's refresh (JSON)", "get",
                 reverse("admin:django_sqlqueue_job_dashboard_data"), {},
                 "job/dashboard_live.html"),
                ("the queues page", "get", reverse("admin:django_sqlqueue_queue_changelist"),
                 {}, None),
                ("the limited queue's page", "get",
                 reverse("admin:django_sqlqueue_queue_change", args=[limited.pk]), {}, None),
                ("the job list, succeeded jobs", "get", jobs, {"status__exact": "succeeded"},
                 "job/change_list.html"),
                ("the job list, exhausted jobs", "get", jobs, {"status__exact": "exhausted"},
                 "job/change_list.html"),
                ("the job list, a search", "get", jobs, {"q": "newsite_app"},
                 "job/change_list.html"),
                (f"job #{ok.pk}'s page", "get",
                 reverse("admin:django_sqlqueue_job_change", args=[ok.pk]), {},
                 "job/change_form.html"),
                (f"job #{failing.pk}'s page (failed)", "get",
                 reverse("admin:django_sqlqueue_job_change", args=[failing.pk]), {},
                 "job/errors.html"),
                ("the delete confirmation", "post", jobs,
                 {"action": "delete_selected", "_selected_action": [failing.pk]},
                 "job/delete_selected_confirmation.html"),
                ("the workers page", "get", reverse("admin:django_sqlqueue_worker_changelist"),
                 {}, "worker/change_list.html"),
                (f"worker {worker.name}'s page", "get",
                 reverse("admin:django_sqlqueue_worker_change", args=[worker.pk]), {},
                 "worker/change_form.html"),
                ("the schedules page", "get",
                 reverse("admin:django_sqlqueue_schedule_changelist"), {},
                 "schedule/change_list.html"),
                (f"schedule {ticked.name}'s page", "get",
                 reverse("admin:django_sqlqueue_schedule_change", args=[ticked.pk]), {},
                 "schedule/change_form.html"),
                ("the workflow's page", "get",
                 reverse("admin:django_sqlqueue_job_workflow", args=[flow.id]), {},
                 "job/workflow.html"),
                ("the workflow's retry confirmation", "post",
                 reverse("admin:django_sqlqueue_job_workflow_act", args=[flow.id, "retry"]), {},
                 "job/workflow_confirm.html"),
            ]
            rendered = set()
            for label, method, url, data, template in pages:
                rendered |= fetch(client, label, method, url, data, template, package_templates)
            contents = {
                "succeeded jobs": (jobs, {"status__exact": "succeeded"}, f"/{ok.pk}/change/",
                                   f"/{failing.pk}/change/"),
                "exhausted jobs": (jobs, {"status__exact": "exhausted"}, f"/{failing.pk}/change/",
                                   f"/{ok.pk}/change/"),
            }
            for label, (url, data, present, absent) in contents.items():
                html = client.get(url, data).content.decode()
                check(present in html and absent not in html,
                      f"the list of {label} does not show the right jobs")
            say("the status filter lists the right jobs")
            schedules_page = client.get(
                reverse("admin:django_sqlqueue_schedule_changelist")).content.decode()
            check("Every second" in schedules_page and ticked.name in schedules_page
                  and "never" not in schedules_page,
                  "the schedules page does not show the schedule and its last run")
            worker_page = client.get(reverse("admin:django_sqlqueue_worker_changelist"))
            check(worker.name in worker_page.content.decode(),
                  f"the workers page does not list the live worker {worker.name}")
            failed_page = client.get(reverse("admin:django_sqlqueue_job_change",
                                             args=[failing.pk])).content.decode()
            check("failing on purpose" in failed_page,
                  f"job #{failing.pk}'s page does not show its error")
            check(Job.objects.filter(pk=failing.pk).exists(),
                  "the delete confirmation page deleted the job")
        except BaseException:
            process.kill()
            process.wait()
            show_log(log_path)
            raise
        stop_worker(process, worker, log_path)
    missing = sorted(shipped - rendered)
    check(not missing, f"templates of the package that no page rendered: {missing}")
    say(f"all {len(shipped)} templates of the package were rendered from {package_templates}")


def fetch(client, label, method, url, data, template, package_templates) -> set:
    """GET (or POST) one page; it must be a 200 that rendered ``template`` from the installed
    package. Returns the package's templates it rendered, relative to its templates dir."""
    try:
        response = getattr(client, method)(url, data)
    except Exception as exc:  # DEBUG is off: the client re-raises what would be a 500
        traceback.print_exc()
        raise CheckFailed(f"{label} ({method.upper()} {url}) raised {exc!r}") from None
    check(response.status_code == 200,
          f"{label} ({method.upper()} {url} {data or ''}): status {response.status_code}")
    ours = set()
    for used in response.templates:
        origin = getattr(used.origin, "name", None) or ""
        if used.name and used.name.startswith("admin/django_sqlqueue/"):
            check(inside(origin, package_templates),
                  f"{label}: {used.name} came from {origin}, not from the installed package")
            ours.add(str(Path(origin).resolve().relative_to(package_templates)))
    if template:
        template = f"admin/django_sqlqueue/{template}"
        check(template in ours,
              f"{label}: did not render the package's {template} (rendered: {sorted(ours)})")
    query = "&".join(f"{key}={value}" for key, value in data.items())
    shown = f"POST {url} {query}" if method == "post" else f"GET {url}{'?' if query else ''}{query}"
    say(f"200 {shown}  ({label})")
    return ours


STEPS = {"installed": installed, "enqueue": enqueue, "jobs-done": jobs_done, "admin": admin_pages}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in STEPS:
        sys.exit(f"usage: python check_site.py {{{','.join(STEPS)}}}")
    try:
        STEPS[sys.argv[1]]()
    except CheckFailed as exc:
        sys.exit(f"check_site.py {sys.argv[1]}: FAILED: {exc}")
