// Shared by the review and adjudication pages: the API client, the reviewer's name, messages.
// Untrusted text (questions, evidence, answers, reasons) is only ever set with textContent.
"use strict";
const Gate = (() => {
  const csrf = document.querySelector('meta[name="csrf-token"]').getAttribute("content");
  const NAME = /^[A-Za-z0-9._:/-]{1,200}$/;
  const STORED = "gate-review-name";

  function say(text, kind) {
    const box = document.getElementById("message");
    box.textContent = text || "";
    box.className = "message" + (kind ? " " + kind : "");
  }

  async function call(method, path, body) {
    const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.headers["X-Gate-CSRF"] = csrf;
      init.body = JSON.stringify(body);
    }
    const reply = await fetch(path, init);
    let data;
    try {
      data = await reply.json();
    } catch (e) {
      data = { error: "the server answered " + reply.status };
    }
    if (!reply.ok) {
      const err = new Error((data && data.error) || "the server answered " + reply.status);
      err.status = reply.status;
      throw err;
    }
    return data;
  }

  // The person's name, asked once and kept in this browser; `ready(name)` starts the page.
  function person(ready) {
    const form = document.getElementById("name-form");
    const input = document.getElementById("name-input");
    function start(name) {
      document.getElementById("who-name").textContent = name;
      document.getElementById("who").hidden = false;
      form.hidden = true;
      ready(name);
    }
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const name = input.value.trim();
      if (!NAME.test(name)) {
        say("A name is letters, digits and . _ : / - only.", "error");
        return;
      }
      localStorage.setItem(STORED, name);
      say("");
      start(name);
    });
    document.getElementById("change-name").addEventListener("click", () => {
      localStorage.removeItem(STORED);
      location.reload();
    });
    const saved = localStorage.getItem(STORED);
    if (saved && NAME.test(saved)) {
      start(saved);
    } else {
      form.hidden = false;
      input.focus();
    }
  }

  function text(el, value) {
    el.textContent = value === null || value === undefined ? "" : String(value);
  }

  function evidenceBoxes(holder, ids) {
    holder.replaceChildren();
    for (const id of ids) {
      const label = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.checked = true;
      box.value = id;
      label.append(box, document.createTextNode(" " + id));
      holder.append(label);
    }
  }

  function checkedEvidence(holder) {
    return Array.from(holder.querySelectorAll("input:checked")).map((box) => box.value);
  }

  function choose(buttons, label) {
    for (const b of buttons) {
      const on = b.dataset.label === label;
      b.setAttribute("aria-checked", on ? "true" : "false");
      b.classList.toggle("chosen", on);
    }
  }

  return { call, say, person, text, evidenceBoxes, checkedEvidence, choose };
})();
