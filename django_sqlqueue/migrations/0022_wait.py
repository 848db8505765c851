from django.db import migrations, models


class Migration(migrations.Migration):
    """Waiting for a job (docs/waiting.md): ``awaited``, set by a waiter on PostgreSQL so that
    the job's final outcome write sends NOTIFY. A constant database default: PostgreSQL and
    MariaDB add the column without rewriting the job table, and rows inserted by plain SQL
    are not awaited."""

    dependencies = [
        ('django_sqlqueue', '0021_transactional_jobs'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='awaited',
            field=models.BooleanField(db_default=False, editable=False),
        ),
    ]
