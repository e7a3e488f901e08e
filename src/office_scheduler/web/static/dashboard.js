// Office Scheduler dashboard: live refresh over Server-Sent Events and board drag-and-drop.
// Regions marked with hx-trigger="office-change from:body" re-fetch themselves (htmx) when
// the server says something changed; nothing here needs a build step.
(function () {
  "use strict";

  let pending = null;
  function refresh() {
    // Several changes in a burst become one refresh.
    if (pending) return;
    pending = setTimeout(function () {
      pending = null;
      htmx.trigger(document.body, "office-change");
    }, 150);
  }

  function connect() {
    if (!window.EventSource) return;
    const source = new EventSource("/events");
    source.addEventListener("change", refresh);
    source.addEventListener("hello", function () {
      document.body.dataset.live = "on";
    });
    source.addEventListener("signed-out", function () {
      source.close();
      window.location.href = "/login";
    });
    source.onerror = function () {
      document.body.dataset.live = "off";
    };
  }

  function showMessage(text, kind) {
    const box = document.getElementById("flash");
    if (!box) return;
    box.textContent = text;
    box.className = "flash " + kind;
  }

  // Dragging a card onto another column posts the same move as the task page's form.
  function wireBoard(root) {
    root.querySelectorAll("[data-task-id]").forEach(function (card) {
      card.addEventListener("dragstart", function (event) {
        event.dataTransfer.setData("text/plain", card.dataset.taskId);
        event.dataTransfer.effectAllowed = "move";
      });
    });
    root.querySelectorAll("[data-state]").forEach(function (column) {
      column.addEventListener("dragover", function (event) {
        event.preventDefault();
        column.classList.add("drop");
      });
      column.addEventListener("dragleave", function () {
        column.classList.remove("drop");
      });
      column.addEventListener("drop", function (event) {
        event.preventDefault();
        column.classList.remove("drop");
        const taskId = event.dataTransfer.getData("text/plain");
        if (!taskId) return;
        const body = new URLSearchParams({ state: column.dataset.state, back_to: "/board" });
        fetch("/tasks/" + encodeURIComponent(taskId) + "/move", {
          method: "POST",
          body: body,
          credentials: "same-origin",
          headers: { "HX-Request": "true" },
        }).then(function (response) {
          if (response.ok || response.redirected) {
            showMessage("Moved to " + column.dataset.state, "notice");
            htmx.trigger(document.body, "office-change");
          } else {
            return response.text().then(function (html) {
              const doc = new DOMParser().parseFromString(html, "text/html");
              const message = doc.querySelector(".error-message");
              showMessage(message ? message.textContent : "Move refused", "error");
            });
          }
        });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    connect();
    wireBoard(document);
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    wireBoard(event.target);
  });
})();
