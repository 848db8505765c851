from django.db import migrations, models


class Migration(migrations.Migration):
    """``Worker.version``: SQLQUEUE["VERSION"] of the code a worker runs, which ``healthcheck
    ready`` compares with the code deployed. A nullable column of the small worker table."""

    dependencies = [
        ('django_sqlqueue', '0022_wait'),
    ]

    operations = [
        migrations.AddField(
            model_name='worker',
            name='version',
            field=models.CharField(blank=True, max_length=100, null=True),
        ),
    ]
