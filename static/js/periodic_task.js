// The periodic task form (django-celery-beat): the chosen crontab's schedule in words under its field.
// django-celery-beat ships this inline; here it is a file, for the Content-Security-Policy.
(function () {
  "use strict";
  const script = document.currentScript;
  document.addEventListener("DOMContentLoaded", () => {
    const $ = django.jQuery;
    const readable = JSON.parse(document.getElementById("readable-crontabs").textContent);
    const original = script.dataset.crontabHelp;
    $(".field-crontab_translation").hide();
    $(".field-crontab").change(() => {
      const help = document.querySelector(".field-crontab .help");
      if (!help) return;
      help.textContent = original;
      help.append(document.createElement("br"), `Translation: ${readable[$("#id_crontab").val()] ?? ""}`);
    });
  });
})();
