"""An excerpt of NVIDIA's Xid catalog (declarative data): what each Xid means and how bad it is.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (Ampere and newer GPUs),
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html — the mnemonic/description and
the resolution bucket (immediate action) per Xid. Severity here follows that action: IGNORE is
info, RESTART_APP (the application's own fault or a recoverable event) is warn, RESET_GPU /
RESTART_BM / CONTACT_SUPPORT (the GPU or its links need service) is fail. For the NVLink Xids
144-150 the catalog's severity depends on the sub-code; the driver prints "Fatal" or "Nonfatal" in
the message, which decides here.
"""

from __future__ import annotations

# code -> (meaning, immediate action in the catalog, severity)
XID_CATALOG: dict[int, tuple[str, str, str]] = {
    8: ("GPU stopped processing", "RESTART_APP", "warn"),
    13: ("Graphics Engine Exception", "RESTART_APP", "warn"),
    31: ("GPU memory page fault", "RESTART_APP", "warn"),
    32: ("Invalid or corrupted push buffer stream", "RESTART_APP", "warn"),
    38: ("Driver firmware error", "RESET_GPU", "fail"),
    43: ("GPU stopped processing", "RESTART_APP", "warn"),
    45: ("Preemptive cleanup, due to previous errors", "IGNORE", "info"),
    48: ("Double Bit ECC Error (DBE)", "RESET_GPU", "fail"),
    61: ("Internal micro-controller breakpoint/warning", "RESET_GPU", "fail"),
    62: ("Internal micro-controller halt", "RESET_GPU", "fail"),
    63: ("ECC page retirement or row remapping recording event", "RESET_GPU", "warn"),
    64: ("ECC page retirement or row remapper recording failure", "RESET_GPU", "fail"),
    68: ("NVDEC0 Exception", "RESTART_APP", "warn"),
    69: ("Graphics Engine class error", "RESTART_APP", "warn"),
    74: ("NVLink Error", "RESET_GPU", "fail"),
    79: ("GPU has fallen off the bus", "RESTART_BM", "fail"),
    92: ("High single-bit ECC error rate", "RESET_GPU", "warn"),
    94: ("Contained ECC error", "RESTART_APP", "warn"),
    95: ("Uncontained ECC error", "RESET_GPU", "fail"),
    109: ("Context Switch Timeout Error", "RESTART_APP", "warn"),
    119: ("GSP RPC Timeout", "RESET_GPU", "fail"),
    120: ("GSP Error", "RESET_GPU", "fail"),
    121: ("C2C Link corrected error", "IGNORE", "info"),
    140: ("Unrecovered ECC Error", "RESET_GPU", "fail"),
    143: ("GPU Initialization Failure", "RESET_GPU", "fail"),
    144: ("NVLINK_SAW_ERROR", "by sub-code", "nvlink"),
    145: ("NVLINK_RLW_ERROR", "by sub-code", "nvlink"),
    146: ("NVLINK_TLW_ERROR", "by sub-code", "nvlink"),
    147: ("NVLINK_TREX_ERROR", "by sub-code", "nvlink"),
    148: ("NVLINK_NVLPW_CTRL_ERROR", "by sub-code", "nvlink"),
    149: ("NVLINK_NETIR_ERROR", "by sub-code", "nvlink"),
    150: ("NVLINK_MSE_ERROR", "by sub-code", "nvlink"),
    154: ("GPU Recovery Action Changed", "as the message says", "fail"),
}
CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


def xid_meaning(code: int, text: str = "") -> tuple[str, str]:
    """(meaning, severity) of one Xid line; an Xid outside this excerpt warns and says so."""
    entry = XID_CATALOG.get(code)
    if entry is None:
        return f"not in fabricscope's excerpt of NVIDIA's Xid catalog ({CATALOG_URL})", "warn"
    meaning, _action, severity = entry
    if severity == "nvlink":
        words = text.split()
        severity = "warn" if "Nonfatal" in words else "fail" if "Fatal" in words else "warn"
    return meaning, severity
