"""PDF/A (`pdf_a`): Chromium's PDF rewritten by Ghostscript (Debian's `ghostscript`) as PDF/A-1b, -2b or -3b: fonts
embedded, colours converted to sRGB with its ICC profile as the output intent, the document's information mirrored
in XMP with its PDF/A identification. Ghostscript runs as a process of its own, in its SAFER mode (it may read only
its input, its definitions and its sRGB profile), and is killed if the capture's time runs out."""

from __future__ import annotations

import asyncio
import contextlib
import glob
import tempfile
from pathlib import Path

from render.contract.errors import InternalError

GHOSTSCRIPT = "gs"
NOT_INSTALLED = ("Ghostscript is not installed on this worker, so it cannot make PDF/A: install Debian's "
                 "`ghostscript` (deploy/install-system-packages.sh does).")


def _ghostscript_file(pattern: str) -> Path:
    found = sorted(glob.glob(f"/usr/share/ghostscript/*/{pattern}"))
    if not found:
        raise InternalError(NOT_INSTALLED)
    return Path(found[-1])


def definitions(profile: Path) -> str:
    """Ghostscript's own PDF/A definitions (its PDFA_def.ps) pointed at `profile`, without the placeholder title
    they set (the document's own title stays)."""
    text = _ghostscript_file("lib/PDFA_def.ps").read_text()
    text = text.replace("(srgb.icc)", f"({profile})")
    lines = text.splitlines()
    kept = [line for index, line in enumerate(lines)
            if not line.lstrip().startswith("[ /Title (Title)")
            and not (line.strip().startswith("/DOCINFO pdfmark") and index
                     and lines[index - 1].lstrip().startswith("[ /Title (Title)"))]
    return "\n".join(kept) + "\n"


async def to_pdf_a(pdf: bytes, level: str) -> bytes:
    """`pdf` as PDF/A of `level` ("1b", "2b" or "3b")."""
    profile = _ghostscript_file("iccprofiles/srgb.icc")
    with tempfile.TemporaryDirectory(prefix="pdfa-") as directory:
        folder = Path(directory)
        source, defs, output = folder / "in.pdf", folder / "PDFA_def.ps", folder / "out.pdf"
        source.write_bytes(pdf)
        defs.write_text(definitions(profile))
        try:
            process = await asyncio.create_subprocess_exec(
                GHOSTSCRIPT, f"-dPDFA={level[0]}", "-dBATCH", "-dNOPAUSE", "-dQUIET", "-dNOOUTERSAVE",
                "-sDEVICE=pdfwrite", "-dPDFACompatibilityPolicy=1", "-sColorConversionStrategy=RGB",
                f"--permit-file-read={profile.parent}/", f"--permit-file-read={folder}/",
                f"-sOutputFile={output}", str(defs), str(source),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except FileNotFoundError:
            raise InternalError(NOT_INSTALLED) from None
        try:
            _, errors = await process.communicate()
        finally:
            if process.returncode is None:  # the capture's time ran out meanwhile
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if process.returncode != 0 or not output.exists():
            said = errors.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise InternalError(f"Ghostscript could not make a PDF/A-{level} of this document ({said[0][:200]}).")
        return output.read_bytes()
