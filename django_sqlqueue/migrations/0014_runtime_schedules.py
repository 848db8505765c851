"""Schedules created at run time: each schedule row names its owner (``source``), the sync from
code ("code", every row so far) or the run-time API and the admin ("runtime")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_sqlqueue', '0013_interruptions'),
    ]

    operations = [
        migrations.AddField(
            model_name='schedule',
            name='source',
            field=models.CharField(choices=[('code', 'declared in code'), ('runtime', 'created at run time')], db_default='code', default='code', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='schedule',
            constraint=models.CheckConstraint(condition=models.Q(('source__in', ('code', 'runtime'))), name='sqlqueue_schedule_source_valid'),
        ),
    ]
