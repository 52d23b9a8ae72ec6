// The upload form refuses a source over the site's limit before sending it: every input stays
// as it is, and the sentence is the site's own (solboard_common/limits.py). The site checks again.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // The 413 page: going back keeps the form's inputs where a fresh form would not.
  document.getElementById("back-to-form")?.addEventListener("click", (event) => {
    if (history.length > 1) {
      event.preventDefault();
      history.back();
    }
  });
  const form = document.getElementById("upload-form");
  const notice = document.getElementById("size-refusal");
  if (!form || !notice) return;
  const limit = Number(form.dataset.sourceLimit);
  const kib = (bytes) => `${Number((bytes / 1024).toPrecision(4))} KiB`;
  form.addEventListener("submit", (event) => {
    const file = form.querySelector("#id_source_file")?.files?.[0];
    const pasted = new TextEncoder().encode(form.querySelector("#id_source")?.value ?? "").length;
    const size = file ? file.size : pasted;
    if (!(size > limit)) {
      notice.hidden = true;
      return;
    }
    event.preventDefault();
    notice.textContent = `${file ? file.name + ": " : ""}the source is ${size} bytes; the limit is ${limit} bytes (${kib(limit)})`;
    notice.hidden = false;
    notice.scrollIntoView({ block: "center" });
  });
});
