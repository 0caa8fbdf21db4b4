"""Issue 24: a new root's default patterns include the document formats (PDF, Word, PowerPoint, Excel, CSV/TSV,
HTML), which sources/extract/ turns into text. Existing roots keep the patterns they have."""

from django.db import migrations, models

# Copied, not imported: a migration must not depend on live code.
DEFAULT_INCLUDE = (
    "*.py *.pyi *.ipynb *.md *.markdown *.mdx *.rst *.txt *.js *.jsx *.mjs *.cjs *.ts *.tsx *.mts *.go "
    "*.rs *.java *.kt *.scala *.c *.h *.cc *.cpp *.hpp *.cs *.rb *.php *.swift *.lua *.sh *.sql *.json "
    "*.yaml *.yml *.toml *.ini *.cfg *.html *.css Dockerfile Makefile *.pdf *.docx *.pptx *.xlsx *.csv "
    "*.tsv *.htm"
)


class Migration(migrations.Migration):
    dependencies = [("sources", "0011_source_references")]

    operations = [
        migrations.AlterField(
            model_name="workspaceroot",
            name="include_globs",
            field=models.TextField(
                default=DEFAULT_INCLUDE, help_text="File name patterns to index, separated by spaces."
            ),
        ),
    ]
