"""Real files of every kind a documents folder holds, written by the tests: PDFs (text pages, an image-only page,
encrypted), Word files with a table and a footnote, Markdown with front matter, HTML and text."""
from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path


def _escaped(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


@dataclass(frozen=True)
class Scan:
    """A scanned page: its text lines drawn into a greyscale image (what a scanner gives), with no text layer."""

    text: str

    def jpeg(self) -> tuple[int, int, bytes]:
        """(width, height, JPEG bytes) of the page's image, the text large enough for OCR to read."""
        from PIL import Image, ImageDraw, ImageFont

        lines = self.text.split("\n")
        image = Image.new("L", (1700, 120 + 90 * len(lines)), 255)
        draw = ImageDraw.Draw(image)
        font = ImageFont.load_default(size=44)
        for i, line in enumerate(lines):
            draw.text((60, 60 + 90 * i), line, font=font, fill=0)
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=90)
        return image.width, image.height, out.getvalue()


def pdf_bytes(pages: list[str | Scan | None], title: str | None = None) -> bytes:
    """A PDF whose page i shows pages[i] (one text line per line, Helvetica); None makes an image-only page of one
    grey pixel, a Scan a page whose only content is an image of its text."""
    objects: list[bytes] = []  # object number = index + 1

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in once the page tree exists
    tree = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    image = add(b"<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray "
                b"/BitsPerComponent 8 /Length 1 >>\nstream\n\x80\nendstream")
    kids = []
    for text in pages:
        picture = image
        if isinstance(text, Scan):
            width, height, jpeg = text.jpeg()
            picture = add(b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray "
                          b"/BitsPerComponent 8 /Filter /DCTDecode /Length %d >>\nstream\n" % (width, height, len(jpeg))
                          + jpeg + b"\nendstream")
            content = b"q %d 0 0 %d 36 %d cm /Im1 Do Q" % (540, 540 * height // width, 756 - 540 * height // width)
        elif text is None:
            content = b"q 200 0 0 200 100 400 cm /Im1 Do Q"
        else:
            lines = [f"({_escaped(line)}) Tj 0 -16 Td" for line in text.split("\n")]
            content = ("BT /F1 11 Tf 72 720 Td " + " ".join(lines) + " ET").encode("latin-1")
        stream = add(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
        kids.append(add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                        b"/Resources << /Font << /F1 %d 0 R >> /XObject << /Im1 %d 0 R >> >> >>"
                        % (tree, stream, font, picture)))
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % tree
    objects[tree - 1] = (b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % k for k in kids)
                         + b"] /Count %d >>" % len(kids))
    info = add(b"<< /Title (" + _escaped(title).encode("latin-1") + b") /CreationDate (D:20240315120000Z) >>"
               ) if title else None
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.write(b"".join(b"%010d 00000 n \n" % o for o in offsets))
    trailer = b"<< /Size %d /Root %d 0 R" % (len(objects) + 1, catalog)
    trailer += b" /Info %d 0 R >>" % info if info else b" >>"
    out.write(b"trailer\n" + trailer + b"\nstartxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


def encrypted_pdf(pages: list[str | Scan | None]) -> bytes:
    """A PDF that opens only with a user password."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf_bytes(pages))))
    writer.encrypt(user_password="secret-user", owner_password="secret-owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


_FOOTNOTES_XML = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<w:footnotes xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
    '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p>'
    '</w:footnote><w:footnote w:id="1"><w:p><w:r><w:t>{note}</w:t></w:r></w:p></w:footnote></w:footnotes>')


def docx_bytes(title: str, sections: list[tuple[str, list[str]]], table: list[list[str]], footnote: str) -> bytes:
    """A Word file: a title, Heading 1 sections of paragraphs, a table under a "Results" heading and a footnote."""
    from datetime import UTC, datetime

    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.created = datetime(2023, 6, 1, tzinfo=UTC)
    for heading, paragraphs in sections:
        document.add_heading(heading, level=1)
        for text in paragraphs:
            document.add_paragraph(text)
    document.add_heading("Results", level=1)
    document.add_heading("Table 2", level=2)
    grid = document.add_table(rows=len(table), cols=len(table[0]))
    for r, row in enumerate(table):
        for c, cell in enumerate(row):
            grid.cell(r, c).text = cell
    raw = io.BytesIO()
    document.save(raw)
    return _with_footnote(raw.getvalue(), footnote)


def _with_footnote(data: bytes, note: str) -> bytes:
    """The .docx with a footnotes part (python-docx writes none), related from the document and typed."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            body = source.read(item.filename)
            if item.filename == "[Content_Types].xml":
                body = body.replace(b"</Types>", b'<Override PartName="/word/footnotes.xml" ContentType="application/'
                                    b'vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml"/></Types>')
            elif item.filename == "word/_rels/document.xml.rels":
                body = body.replace(b"</Relationships>", b'<Relationship Id="rIdFoot" Type="http://schemas.'
                                    b'openxmlformats.org/officeDocument/2006/relationships/footnotes" '
                                    b'Target="footnotes.xml"/></Relationships>')
            target.writestr(item, body)
        target.writestr("word/footnotes.xml", _FOOTNOTES_XML.format(note=note))
    return out.getvalue()


def write(folder: Path, files: dict[str, bytes | str]) -> None:
    """Write `files` (path relative to `folder` -> bytes or text) into `folder`."""
    for path, body in files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, str):
            target.write_text(body, encoding="utf-8")
        else:
            target.write_bytes(body)


def report_pages(count: int = 20, special: dict[int, str] | None = None) -> list[str | None]:
    """`count` pages of filler text, each naming its page; `special` replaces the text of some (1-based) pages."""
    pages: list[str | None] = []
    for number in range(1, count + 1):
        pages.append((special or {}).get(number) or
                     f"Section {number} of the annual review.\nThis page describes routine matters of page {number}.")
    return pages
