// The adjudication page: the items whose labels disagree or all abstain, every original label and
// reason beside them, and the adjudicator's own label and reason.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  let adjudicator = null;

  function row(line) {
    const tr = document.createElement("tr");
    for (const value of [line.reviewer, line.label, line.reason]) {
      const td = document.createElement("td");
      Gate.text(td, value);
      tr.append(td);
    }
    return tr;
  }

  function card(entry) {
    const node = $("item-template").content.firstElementChild.cloneNode(true);
    const one = (cls) => node.querySelector("." + cls);
    Gate.text(one("question"), entry.user_input);
    Gate.text(one("reference"), entry.reference);
    Gate.text(one("response"), entry.response);
    Gate.evidenceBoxes(one("evidence-ids"), entry.evidence);
    node.querySelector(".originals tbody").append(...entry.labels.map(row));
    const buttons = Array.from(node.querySelectorAll("button.label"));
    let chosen = null;
    const reason = one("reason");
    const choose = (label) => {
      chosen = label;
      Gate.choose(buttons, label);
      reason.focus();
    };
    if (entry.you_labelled) {
      // listed only when the server permits self-adjudication
      const own = one("own");
      own.hidden = false;
      Gate.text(own, "You labelled this item: settling it is recorded as a self-adjudication, not blind.");
    }
    async function settle() {
      if (!chosen) return Gate.say("Choose a label first.", "error");
      if (!reason.value.trim()) return Gate.say("Say why: every adjudication needs a reason.", "error");
      try {
        const body = { adjudicator, item_id: entry.item_id, label: chosen, reason: reason.value.trim(), evidence: Gate.checkedEvidence(one("evidence-ids")) };
        await Gate.call("POST", "/api/adjudicate", body);
        Gate.say(`Recorded: ${chosen}.`, "ok");
        await load();
      } catch (e) {
        Gate.say(e.message, "error");
      }
    }
    for (const b of buttons) b.addEventListener("click", () => choose(b.dataset.label));
    one("settle").addEventListener("click", settle);
    node.addEventListener("keydown", (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.target === reason) {
        if (ev.key === "Enter" && !ev.shiftKey) {
          ev.preventDefault();
          settle();
        } else if (ev.key === "Escape") {
          node.focus();
        }
        return;
      }
      if (ev.target.matches("input, textarea")) return;
      if (/^[1-9]$/.test(ev.key) && buttons[Number(ev.key) - 1]) {
        ev.preventDefault();
        choose(buttons[Number(ev.key) - 1].dataset.label);
      }
    });
    return node;
  }

  async function load() {
    const data = await Gate.call("GET", "/api/adjudicate?adjudicator=" + encodeURIComponent(adjudicator));
    $("list").hidden = false;
    Gate.text($("progress"), data.awaiting ? `${data.awaiting} awaiting adjudication` : "Nothing awaits adjudication.");
    $("items").replaceChildren(...data.items.map(card));
    const first = $("items").querySelector("article");
    if (first) first.focus();
  }

  Gate.person((name) => {
    adjudicator = name;
    load().catch((e) => Gate.say(e.message, "error"));
  });
})();
