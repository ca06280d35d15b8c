// Why this file exists: the types of testing-component.js, which loads a built component
// for the Harness.

/** A built component, loaded for the Harness. */
export class LoadedComponent {
  private constructor();
}

/** Loads a component built by build.sh, for `new Harness(component, ctx)`. */
export function loadComponent(path: string | URL): Promise<LoadedComponent>;
