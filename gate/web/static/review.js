// The review page: one item at a time, labelled by keyboard alone.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const buttons = Array.from(document.querySelectorAll("#labels button.label"));
  let reviewer = null;
  let item = null;
  let chosen = null;
  let busy = false;

  function choose(label) {
    chosen = label;
    Gate.choose(buttons, label);
  }

  function show(view) {
    if (!view.item) {
      item = null;
      $("item").hidden = true;
      $("done").hidden = false;
      return;
    }
    item = view.item;
    $("done").hidden = true;
    $("item").hidden = false;
    Gate.text($("question"), item.user_input);
    Gate.text($("reference"), item.reference);
    Gate.text($("response"), item.response);
    Gate.evidenceBoxes($("evidence-ids"), item.evidence);
    Gate.text($("progress"), view.position === undefined ? "Label it again" : `Item ${view.position + 1} of ${view.total} in your order`);
    $("reason").value = "";
    choose(null);
    $("decide").focus();
  }

  async function next() {
    show(await Gate.call("GET", "/api/next?reviewer=" + encodeURIComponent(reviewer)));
  }

  async function submit() {
    if (busy || !item) return;
    if (!chosen) {
      Gate.say(`Choose a label first (keys 1–${buttons.length}).`, "error");
      return;
    }
    const reason = $("reason").value.trim();
    if (!reason) {
      Gate.say("Say why: every label needs a reason.", "error");
      $("reason").focus();
      return;
    }
    busy = true;
    try {
      const body = { reviewer, item_id: item.item_id, label: chosen, reason, evidence: Gate.checkedEvidence($("evidence-ids")) };
      const reply = await Gate.call("POST", "/api/label", body);
      Gate.say(`Saved: ${chosen}.`, "ok");
      show(reply.next);
    } catch (e) {
      Gate.say(e.message, "error");
      if (e.status === 409) await next();
    } finally {
      busy = false;
    }
  }

  async function undo() {
    if (busy) return;
    busy = true;
    try {
      const reply = await Gate.call("POST", "/api/undo", { reviewer });
      Gate.say(`Undone: your label "${reply.label}" is withdrawn (the ledger keeps it, and the retraction). Label the item again.`, "ok");
      show({ item: reply.item });
    } catch (e) {
      Gate.say(e.message, "error");
    } finally {
      busy = false;
    }
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || !reviewer) return;
    const target = ev.target;
    if (target.id === "reason") {
      if (ev.key === "Enter" && !ev.shiftKey) {
        ev.preventDefault();
        submit();
      } else if (ev.key === "Escape") {
        $("decide").focus();
      }
      return;
    }
    if (target.matches && target.matches("input, textarea")) return;
    if (/^[1-9]$/.test(ev.key) && item) {
      const button = buttons[Number(ev.key) - 1];
      if (button) {
        ev.preventDefault();
        choose(button.dataset.label);
        $("reason").focus();
      }
    } else if (ev.key === "Enter" && item && !(target instanceof HTMLButtonElement)) {
      ev.preventDefault();
      submit();
    } else if (ev.key === "u" || ev.key === "U") {
      ev.preventDefault();
      undo();
    }
  });
  for (const b of buttons) {
    b.addEventListener("click", () => {
      choose(b.dataset.label);
      $("reason").focus();
    });
  }
  $("submit").addEventListener("click", submit);
  $("undo").addEventListener("click", undo);
  Gate.person((name) => {
    reviewer = name;
    next().catch((e) => Gate.say(e.message, "error"));
  });
})();
