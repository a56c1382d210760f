// Which of Stop and Delete a job's status allows, and why not. The api enforces the same
// rules (StopOptimizationJob, DeleteOptimizationJob); the dashboard greys the button out
// first so nobody clicks into an error they could have been told about.

const STOPPABLE = ["STARTING", "INPROGRESS"];
const DELETABLE = ["COMPLETED", "FAILED", "STOPPED"];

// null when Stop may be pressed, otherwise the button's tooltip.
export function stopBlockedReason(status) {
  if (STOPPABLE.includes(status)) return null;
  if (status === "STOPPING") return "The job is already stopping.";
  return `The job is ${status}; only a STARTING or INPROGRESS job can be stopped.`;
}

// null when Delete may be pressed, otherwise the button's tooltip.
export function deleteBlockedReason(status) {
  if (DELETABLE.includes(status)) return null;
  return `The job is ${status}; stop it and delete it once it is COMPLETED, FAILED or STOPPED.`;
}
