"""Issue 40: web roots (sources/connectors/web/): a start URL crawled into the index."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sources", "0022_indexedfile_marker")]

    operations = [
        migrations.AddField(
            model_name="workspaceroot",
            name="web_url",
            field=models.CharField(
                blank=True,
                help_text="Empty: not a web site. An http(s) start page (or a sitemap .xml): the pages under its "
                "directory on its host are crawled, robots.txt honoured, and cited by URL. Hosts on loopback or "
                "private addresses are refused unless RAG_WEB_ALLOW_PRIVATE.",
                max_length=1024,
                verbose_name="web site URL",
            ),
        ),
    ]
